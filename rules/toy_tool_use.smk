# `snakemake toy_tool_use`: the tool-use toy (config key `toy_tool_use` of configs/default.yaml, the settings of
# configs/toy_tool_use.yaml laid over the toy's; rules/common.smk), then the artifacts that read it: Table 2,
# Figure 1 (right) and the tool_use_gain numbers. The mappings of paper/toy/ name the run; `snakemake paper` reads
# it when it exists (rows "not run" before) and never trains it (PAPER_BUILT_RUNS in rules/common.smk). The list of
# artifacts is in rules/paper_common.smk.

if TOY_TOOL_USE:

    rule toy_tool_use:
        """The tool-use toy run (config key toy_tool_use), Table 2, Figure 1 (right) and the tool_use_gain numbers."""
        input:
            toy_tool_use_outputs(),

else:

    localrules:
        toy_tool_use,

    rule toy_tool_use:
        """Fails at once: this config has no tool-use toy."""
        log:
            OUT.log("toy_tool_use"),
        params:
            message=shlex.quote(
                "the target toy_tool_use needs the config key toy_tool_use (run name -> a settings file over the "
                "run, as in configs/default.yaml); this config has none"
            ),
        shell:
            "echo {params.message} | tee {log} >&2; exit 1"

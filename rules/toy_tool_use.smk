# `snakemake toy_tool_use`: the tool-use toy (config key `toy_tool_use` of configs/default.yaml, the settings of
# configs/toy_tool_use.yaml laid over the toy's; rules/common.smk), then the artifacts that read it: Table 2,
# Figure 1 (right) and the tool_use_gain numbers. The mappings of paper/toy/ name the run; `snakemake paper` reads
# it when it exists (rows "not run" before) and never trains it (PAPER_BUILT_RUNS in rules/common.smk).

TOY_TOOL_USE_TABLES = ["table2"]
TOY_TOOL_USE_FIGURES = ["fig1_right"]
TOY_TOOL_USE_NUMBERS = ["tool_use_gain"]


def toy_tool_use_outputs():
    """The run's suite (curves, eval.final at the base model and the last checkpoint) and the artifacts reading it."""
    files = [path for run in TOY_TOOL_USE for path in run_suite_files(run)]
    files += [path for table in TOY_TOOL_USE_TABLES for path in paper_table_files(table).values()]
    files += [f"{PAPER_FIGURES_DIR}/{PAPER_FIGURE_STEMS[figure]}.{ext}" for figure in TOY_TOOL_USE_FIGURES
              for ext in ("pdf", "png", "pdf.provenance.json")]
    return files + [path for group in TOY_TOOL_USE_NUMBERS for path in paper_number_files(group).values()]


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
        shell:
            "echo 'the target toy_tool_use needs the config key toy_tool_use (run name -> a settings file over the "
            "run, as in configs/default.yaml); this config has none' >&2; exit 1"

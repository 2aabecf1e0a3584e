# The numbers the paper's text quotes, one script and one rule per group (paper/scripts/num_<group>.py).
# `snakemake paper_numbers` writes <results_dir>/paper/numbers/<group>.tex (LaTeX macros: ours and the paper's
# value, \Num<Name> and \Num<Name>Reported) and <group>.tex.provenance.json; paper/main.tex inputs every file.
#
# Declared inputs: the script (the group's own logic), the shared spade.paper modules it imports, directly or through
# another of them (paper_script_lib: src/spade/paper/numbers.py and the table modules whose measures it reuses), the
# run mapping (config key
# paper.number_runs) and the reported CSV the group reads. As for the tables, the run folders of other runs are NOT
# declared inputs, except the configured runs' (rules/paper_common.smk, which also holds the paths and functions
# used here).


for _group in PAPER_NUMBER_GROUPS:

    rule:
        name:
            f"paper_number_{_group}"
        input:
            lib=paper_script_lib(script(f"num_{_group}.py")),
            script=script(f"num_{_group}.py"),
            mapping=NUMBER_RUNS,
            reported=paper_number_reported(_group),
            configured_run=paper_number_configured_run(_group),
        output:
            **reported_files(paper_number_files(_group), "paper_number", "Paper text", f"quoted numbers: {_group}"),
        log:
            OUT.log(f"paper_number_{_group}"),
        conda:
            CPU_ENV
        params:
            runs=paper_number_fingerprint(_group),
            runs_root=RUNS_ROOT,
            reported_dir=lambda wildcards, input: os.path.dirname(input.reported),
            python=CPU_PYTHON,
        shell:
            "{params.python} {input.script} --mapping {input.mapping} --runs-root {params.runs_root} "
            "--reported-dir {params.reported_dir} --out {output.tex} > {log} 2>&1"


rule paper_numbers:
    """Every quoted number of the paper from whatever results exist; missing runs print "not run"."""
    input:
        [path for group in PAPER_NUMBER_GROUPS for path in paper_number_files(group).values()],

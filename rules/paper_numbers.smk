# The numbers the paper's text quotes, one script and one rule per group (paper/scripts/num_<group>.py).
# `snakemake paper_numbers` writes <results_dir>/paper/numbers/<group>.tex (LaTeX macros: ours and the paper's
# value, \Num<Name> and \Num<Name>Reported) and <group>.tex.provenance.json; paper/main.tex inputs every file.
#
# Declared inputs: the script, the shared logic (src/spade/paper_numbers.py), the run mapping (config key
# paper.number_runs) and the reported CSV the group reads. As in rules/paper_tables.smk, the run folders of other
# runs are NOT declared inputs (they are outputs of other configs' train/evaluate rules); a fingerprint of the files
# read is a parameter, so a number reruns when one of them changes. The configured runs (PAPER_BUILT_RUNS in rules/common.smk)
# that the mapping names have their outputs declared so that they are built first.

from spade import paper_numbers as _paper_numbers

NUMBER_RUNS = repo_path(SPADE.paper.number_runs)  # config key paper.number_runs
PAPER_NUMBERS_LIB = str(Path(workflow.basedir) / "src" / "spade" / "paper_numbers.py")
PAPER_NUMBERS_DIR = f"{OUT.root}/paper/numbers"
PAPER_NUMBERS_REPORTED = Path(workflow.basedir) / "paper" / "reported"
PAPER_NUMBER_GROUPS = _paper_numbers.GROUPS


def paper_number_files(group):
    tex = f"{PAPER_NUMBERS_DIR}/{group}.tex"
    return {"tex": tex, "provenance": tex + ".provenance.json"}


def paper_number_configured_run(group):
    """The configured runs' outputs the group reads, for each run the mapping names (else nothing)."""

    def inputs(wildcards):
        mapping = _paper_numbers.load_number_runs(NUMBER_RUNS)
        mapped = _paper_numbers.group_runs(mapping, group)
        selected = "selected" in _paper_numbers.group_step_rules(mapping, group)
        files = []
        for run in (run for run in PAPER_BUILT_RUNS if run in mapped):
            if group not in _paper_numbers.EVAL_GROUPS:  # environment archives: complete once training is
                files.append(OUT.run_summary(run))
                continue
            files += run_suite_files(run)
            if selected:
                files.append(OUT.selected_checkpoint(run))
        return files

    return inputs


def paper_number_fingerprint(group):
    def fingerprint(wildcards):
        runs = _paper_numbers.group_runs(_paper_numbers.load_number_runs(NUMBER_RUNS), group)
        return _paper_numbers.run_fingerprint(OUT.root + "/runs", [r for r in runs if r not in PAPER_BUILT_RUNS], group)

    return fingerprint


for _group in PAPER_NUMBER_GROUPS:

    rule:
        name:
            f"paper_number_{_group}"
        input:
            lib=PAPER_NUMBERS_LIB,
            script=script(f"num_{_group}.py"),
            mapping=NUMBER_RUNS,
            reported=str(PAPER_NUMBERS_REPORTED / _paper_numbers.GROUP_REPORTED[_group]),
            configured_run=paper_number_configured_run(_group),
        params:
            runs=paper_number_fingerprint(_group),
            reported_dir=str(PAPER_NUMBERS_REPORTED),
        output:
            **paper_number_files(_group),
        log:
            OUT.log(f"paper_number_{_group}"),
        shell:
            "{PYTHON} {input.script} --mapping {input.mapping} --runs-root " + OUT.root + "/runs"
            " --reported-dir {params.reported_dir} --out {output.tex} > {log} 2>&1"


rule paper_numbers:
    """Every quoted number of the paper from whatever results exist; missing runs print "not run"."""
    input:
        [path for group in PAPER_NUMBER_GROUPS for path in paper_number_files(group).values()],

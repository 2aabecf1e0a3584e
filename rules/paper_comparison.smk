# The environment-source comparison (ours, not in the paper; issue 7): a table and a figure, one row or bar per
# source of environments (SPADE's designer one-shot, with feedback revisions, fixed pools, mechanism families, ...).
# `snakemake paper_comparison` writes <results_dir>/paper/tables/env_sources.{md,tex,md.provenance.json} and
# <results_dir>/paper/figures/env_sources.{pdf,png,pdf.provenance.json}; the mapping of sources to runs is config key
# paper.comparison_runs (paper/comparison_runs.yaml; the toy: paper/toy/comparison_runs.yaml).
#
# As rules/paper_tables.smk: the run folders of other configs are read, not declared (a fingerprint parameter reruns
# the table when one of their files changes); the configured runs the mapping names are declared, so they are built
# first. The figure draws the table's sidecar only.

import functools

from spade import paper_comparison as _paper_comparison
from spade.report import ReportInputError

COMPARISON_RUNS = repo_path(SPADE.paper.comparison_runs)  # config key paper.comparison_runs
PAPER_COMPARISON_LIB = str(Path(workflow.basedir) / "src" / "spade" / "paper_comparison.py")
COMPARISON_TABLE = f"{PAPER_TABLES_DIR}/env_sources.md"
COMPARISON_FIGURE = f"{PAPER_FIGURES_DIR}/env_sources.pdf"


@functools.cache  # read once per workflow parse, shared by the input and params functions
def _comparison_mapping():
    try:
        return _paper_comparison.load_comparison_runs(COMPARISON_RUNS)
    except ReportInputError as exc:
        raise WorkflowError(f"invalid configuration: config key 'paper.comparison_runs': {exc}")


def comparison_configured_inputs(wildcards):
    """The outputs of the configured runs the comparison names: their suites, and the selected checkpoint when the
    mapping's step is `selected`."""
    mapping = _comparison_mapping()
    files = []
    for run in (run for run in PAPER_BUILT_RUNS if run in _paper_comparison.comparison_runs(mapping)):
        files += run_suite_files(run) + ([OUT.selected_checkpoint(run)] if mapping["step"] == "selected" else [])
    return files


def comparison_fingerprint(wildcards):
    runs = _paper_comparison.comparison_runs(_comparison_mapping())
    return _paper_comparison.run_fingerprint(RUNS_ROOT, [run for run in runs if run not in PAPER_BUILT_RUNS])


rule paper_env_sources_table:
    """SBERT embeddings of every source's environments on the CPU: seconds to minutes."""
    input:
        lib=PAPER_COMPARISON_LIB,
        tables_lib=PAPER_TABLES_LIB,
        script=script("table_env_sources.py"),
        mapping=COMPARISON_RUNS,
        configured_run=comparison_configured_inputs,
    params:
        runs=comparison_fingerprint,
    output:
        md=COMPARISON_TABLE,
        tex=COMPARISON_TABLE[: -len(".md")] + ".tex",
        provenance=COMPARISON_TABLE + ".provenance.json",
    log:
        OUT.log("paper_env_sources_table"),
    shell:
        "{PYTHON} {input.script} --mapping {input.mapping} --runs-root " + RUNS_ROOT + " --out {output.md} > {log} 2>&1"


rule paper_env_sources_figure:
    input:
        lib=PAPER_COMPARISON_LIB,
        script=script("fig_env_sources.py"),
        table=COMPARISON_TABLE + ".provenance.json",
    output:
        pdf=COMPARISON_FIGURE,
        png=COMPARISON_FIGURE[: -len(".pdf")] + ".png",
        provenance=COMPARISON_FIGURE + ".provenance.json",
    log:
        OUT.log("paper_env_sources_figure"),
    shell:
        "{PYTHON} {input.script} --table {input.table} --out {output.pdf} > {log} 2>&1"


rule paper_comparison:
    """The environment-source table and figure from whatever results exist; missing runs read "not run"."""
    input:
        rules.paper_env_sources_table.output,
        rules.paper_env_sources_figure.output,

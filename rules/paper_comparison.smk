# The environment-source comparison (ours, not in the paper; issue 7): a table and a figure, one row or bar per
# source of environments (SPADE's designer one-shot, with feedback revisions, fixed pools, mechanism families, ...).
# `snakemake paper_comparison` writes <results_dir>/paper/tables/env_sources.{md,tex,md.provenance.json} and
# <results_dir>/paper/figures/env_sources.{pdf,png,pdf.provenance.json}; the mapping of sources to runs is config key
# paper.comparison_runs (paper/comparison_runs.yaml; the toy: paper/toy/comparison_runs.yaml).
#
# As for the tables: the run folders of other configs are read, not declared (a fingerprint parameter reruns the
# table when one of their files changes); the configured runs the mapping names are declared, so they are built
# first (rules/paper_common.smk). The figure draws the table's sidecar only. Each artifact's own logic is in its
# script; the `lib` inputs are the shared spade.paper modules the script imports, directly or through another of them.


rule paper_env_sources_table:
    """SBERT embeddings of every source's environments on the CPU: seconds to minutes."""
    input:
        lib=paper_script_lib(script("table_env_sources.py")),
        script=script("table_env_sources.py"),
        mapping=COMPARISON_RUNS,
        configured_run=comparison_configured_inputs,
    output:
        **reported_files(comparison_table_files(), "env_sources_table", "Environment sources", "table"),
    log:
        OUT.log("paper_env_sources_table"),
    conda:
        CPU_ENV
    params:
        runs=comparison_fingerprint,
        runs_root=RUNS_ROOT,
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --mapping {input.mapping} --runs-root {params.runs_root} --out {output.md} "
        "> {log} 2>&1"


rule paper_env_sources_figure:
    input:
        lib=paper_script_lib(script("fig_env_sources.py")),
        script=script("fig_env_sources.py"),
        table=f"{COMPARISON_TABLE_STEM}.md.provenance.json",
    output:
        **reported_files(comparison_figure_files(), "env_sources_figure", "Environment sources", "figure"),
    log:
        OUT.log("paper_env_sources_figure"),
    conda:
        CPU_ENV
    params:
        python=CPU_PYTHON,
    shell:
        "{params.python} {input.script} --table {input.table} --out {output.pdf} > {log} 2>&1"


rule paper_comparison:
    """The environment-source table and figure from whatever results exist; missing runs read "not run"."""
    input:
        # plain paths: the rules' outputs carry their report() flags, which belong to the rules that make them
        list(comparison_table_files().values()),
        list(comparison_figure_files().values()),

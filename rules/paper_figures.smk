# Paper figures 1 (middle, right), 5, 6, 7, 10, 11, 12, 13, 14, 16, 17 and 18, each by its own script
# (paper/scripts/fig<N>_<name>.py). `snakemake paper_figures` writes <results_dir>/paper/figures/<stem>.pdf,
# <stem>.png and <stem>.pdf.provenance.json (inputs with SHA-256, run provenance, and "missing").
#
# Declared inputs: the script (the figure's own logic), the shared spade.paper modules it imports, directly or through
# another of them (paper_script_lib: src/spade/paper/figures.py, report.py, scale.py, table_runs.py), the run
# mapping (paper/figure_runs.yaml) and, for Figure 18, its reported CSV. Editing a script reruns that figure only;
# editing a shared module or the mapping reruns the figures using it (src/spade/paper/figures.py: all of them).
# As for the tables, the run folders a figure reads are NOT declared inputs, except the configured runs' (see
# rules/paper_common.smk, which also holds the paths and functions used here).


for _figure, _stem in PAPER_FIGURES_PRESENT.items():

    rule:
        name:
            f"paper_{_figure}"
        input:
            lib=paper_script_lib(script(f"{_stem}.py")),
            script=script(f"{_stem}.py"),
            mapping=FIGURE_RUNS,
            configured_run=paper_figure_configured_run(_figure),
            reported=paper_figure_reported(_figure),
        output:
            **reported_files(
                paper_figure_files(_stem), "paper_figure", paper_figure_category(_figure), PAPER_FIGURE_TITLES[_figure]
            ),
        log:
            OUT.log(f"paper_{_figure}"),
        conda:
            CPU_ENV
        params:
            runs=paper_figure_fingerprint(_figure),
            runs_root=RUNS_ROOT,
            python=CPU_PYTHON,
        shell:
            "{params.python} {input.script} --mapping {input.mapping} --runs-root {params.runs_root} "
            "--out {output.pdf} > {log} 2>&1"


rule paper_figures:
    """Every paper figure from whatever results exist; missing runs are named in the figure and its sidecar."""
    input:
        [path for stem in PAPER_FIGURES_PRESENT.values() for path in paper_figure_files(stem).values()],

# Paper figures 1 (middle, right), 5, 6, 7, 10, 11, 12, 13, 14, 16, 17 and 18, each by its own script
# (paper/scripts/fig<N>_<name>.py). `snakemake paper_figures` writes <results_dir>/paper/figures/<stem>.pdf,
# <stem>.png and <stem>.pdf.provenance.json (inputs with SHA-256, run provenance, and "missing").
#
# As rules/paper_tables.smk: the run folders a figure reads (paper/figure_runs.yaml) are NOT declared inputs
# (they are outputs of train/evaluate rules of other configs); a fingerprint of the files read is a parameter,
# so a figure reruns when one of them changes. Editing a script reruns that figure only; editing the shared
# logic (src/spade/paper_figures.py) or the mapping reruns all figures. The configured runs (PAPER_BUILT_RUNS in
# rules/common.smk), when mapped, have their outputs declared, so they are built first.

from spade import paper_figures as _paper_figures

FIGURE_RUNS = repo_path(SPADE.paper.figure_runs)  # config key paper.figure_runs
PAPER_FIGURES_LIB = str(Path(workflow.basedir) / "src" / "spade" / "paper_figures.py")
PAPER_FIGURES_DIR = f"{OUT.root}/paper/figures"
PAPER_FIGURE_STEMS = {
    "fig1_middle": "fig1_middle_games_transfer",
    "fig1_right": "fig1_right_tool_use_transfer",
    "fig5": "fig5_transfer_curves",
    "fig6": "fig6_learnable_share",
    "fig7": "fig7_tsne",
    "fig10": "fig10_ablation_curves",
    "fig11": "fig11_designer_reward",
    "fig12": "fig12_model_size",
    "fig13": "fig13_curriculum_breadth",
    "fig14": "fig14_skills_curves",
    "fig16": "fig16_reward_levels",
    "fig17": "fig17_skill_win_rates",
    "fig18": "fig18_windowed_diversity",
}
PAPER_FIGURES_PRESENT = {fig: stem for fig, stem in PAPER_FIGURE_STEMS.items() if (SCRIPT_DIR / f"{stem}.py").is_file()}
# reported values a figure draws (paper/reported/): an input, so editing one reruns that figure
PAPER_FIGURE_REPORTED = {"fig18": Path(workflow.basedir) / "paper" / "reported" / "quoted_numbers.csv"}


def paper_figure_configured_run(figure):
    def inputs(wildcards):
        mapped = _paper_figures.figure_runs(_paper_figures.load_figure_runs(FIGURE_RUNS), figure)
        evals = any(k in ("eval", "selected") for k in _paper_figures._kinds(figure))
        return [path for run in PAPER_BUILT_RUNS if run in mapped
                for path in (run_suite_files(run) if evals else [OUT.run_summary(run)])]

    return inputs


def paper_figure_fingerprint(figure):
    def fingerprint(wildcards):
        runs = _paper_figures.figure_runs(_paper_figures.load_figure_runs(FIGURE_RUNS), figure)
        return _paper_figures.run_fingerprint(OUT.root + "/runs", [r for r in runs if r not in PAPER_BUILT_RUNS], figure)

    return fingerprint


for _figure, _stem in PAPER_FIGURES_PRESENT.items():

    rule:
        name:
            f"paper_{_figure}"
        input:
            lib=PAPER_FIGURES_LIB,
            script=script(f"{_stem}.py"),
            mapping=FIGURE_RUNS,
            configured_run=paper_figure_configured_run(_figure),
            reported=[str(PAPER_FIGURE_REPORTED[_figure])] if _figure in PAPER_FIGURE_REPORTED else [],
        params:
            runs=paper_figure_fingerprint(_figure),
        output:
            pdf=f"{PAPER_FIGURES_DIR}/{_stem}.pdf",
            png=f"{PAPER_FIGURES_DIR}/{_stem}.png",
            provenance=f"{PAPER_FIGURES_DIR}/{_stem}.pdf.provenance.json",
        log:
            OUT.log(f"paper_{_figure}"),
        shell:
            "{PYTHON} {input.script} --mapping {input.mapping} --runs-root " + OUT.root + "/runs"
            " --out {output.pdf} > {log} 2>&1"


rule paper_figures:
    """Every paper figure from whatever results exist; missing runs are named in the figure and its sidecar."""
    input:
        [f"{PAPER_FIGURES_DIR}/{stem}.{ext}" for stem in PAPER_FIGURES_PRESENT.values()
         for ext in ("pdf", "png", "pdf.provenance.json")],

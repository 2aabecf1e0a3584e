# The paper artifacts' shared settings and functions (rules/paper_*.smk, rules/toy_*.smk hold only their rules):
# where each table, figure and number goes, which configured runs' outputs each declares as inputs, and the
# fingerprint params of the runs each reads without declaring them.
#
# Results of the runs an artifact maps are read from <results_dir>/runs/<run>/ by its script. They are NOT declared
# as inputs, on purpose: those files are outputs of the train/evaluate/select_checkpoint rules, so declaring them
# would put the jobs that made them into this DAG with the *current* config's parameters, and Snakemake would
# redo (retrain, re-evaluate) a paper run whenever the current config is another one (the toy one, say).
# Instead a fingerprint of those files (names, sizes, modification times; spade.paper.table_runs.run_fingerprint)
# is a parameter, so an artifact reruns when a result it reads changes. The one exception is the configured runs
# (PAPER_BUILT_RUNS in rules/common.smk): those the mapping names have their outputs declared as inputs, so they are
# built first.

import functools
import shutil as _shutil

from spade.paper import comparison as _paper_comparison
from spade.paper import deps as _paper_deps
from spade.paper import figures as _paper_figures
from spade.paper import numbers as _paper_numbers
from spade.paper import table_runs as _paper_table_runs
from spade.paper.report import ReportInputError

RUNS_ROOT = os.path.dirname(OUT.run_dir("run"))  # <results_dir>/runs, the param `runs_root` (--runs-root)
PAPER_DIR = f"{OUT.root}/paper"
REPORTED_DIR = Path(workflow.basedir) / "paper" / "reported"  # the paper's reported values, one CSV per artifact
PAPER_SOURCE_DIR = Path(workflow.basedir) / "src" / "spade" / "paper"  # the shared reporting code of the scripts


def paper_script_lib(path):
    """The `lib` input of an artifact's rule: every shared spade.paper module its script (or module) imports, directly
    or through another of them, read from the code (spade.paper.deps). The artifact's own code is its script, the
    `script` input, so editing a script reruns that artifact alone and editing a shared module reruns its users."""
    return [str(lib) for lib in _paper_deps.script_libs(path, PAPER_SOURCE_DIR)]


# ----- tables (rules/paper_tables.smk) ----------------------------------------------------------------------------
TABLE_RUNS = repo_path(SPADE.paper.table_runs)  # which run stands for which paper row (config key paper.table_runs)
RECIPE_DIR = Path(workflow.basedir) / "configs" / "recipes"
PAPER_TABLES_DIR = f"{PAPER_DIR}/tables"
PAPER_TABLE_STEMS = {
    "table1": "table1_games",
    "table2": "table2_tool_use",
    "table3": "table3_ablations",
    "table5": "table5_hyperparameters",
    "table6": "table6_ablations_full",
    "table7": "table7_env_quality",
    "table8": "table8_diversity",
}


def paper_table_files(table):
    """The three outputs of a table: Markdown, LaTeX and the provenance sidecar of the Markdown file."""
    stem = f"{PAPER_TABLES_DIR}/{PAPER_TABLE_STEMS[table]}"
    return {"md": f"{stem}.md", "tex": f"{stem}.tex", "provenance": f"{stem}.md.provenance.json"}


def paper_table_reported(table):
    return str(REPORTED_DIR / f"{PAPER_TABLE_STEMS[table]}.csv")


def paper_table_script(table):
    return script(f"{PAPER_TABLE_STEMS[table]}.py")


def configured_run_inputs(table):
    """The configured runs' outputs that the table reads, for each run the mapping names (else nothing)."""

    def inputs(wildcards):
        rules_by_run = _paper_table_runs.step_rules(_paper_table_runs.load_table_runs(TABLE_RUNS), table)
        files = []
        for run in (run for run in PAPER_BUILT_RUNS if run in rules_by_run):
            if table in ("table7", "table8"):  # environment archives and metrics: complete once training is
                files.append(OUT.run_summary(run))
                continue
            files += run_suite_files(run)
            if "selected" in rules_by_run[run]:
                files.append(OUT.selected_checkpoint(run))
        return files

    return inputs


def mapped_runs_fingerprint(table):
    """A hash of the result files of the other runs the table maps: a parameter, so a changed result reruns it."""

    def fingerprint(wildcards):
        runs = _paper_table_runs.mapped_runs(_paper_table_runs.load_table_runs(TABLE_RUNS), table)
        return _paper_table_runs.run_fingerprint(RUNS_ROOT, [run for run in runs if run not in PAPER_BUILT_RUNS], table)

    return fingerprint


# ----- figures (rules/paper_figures.smk) --------------------------------------------------------------------------
FIGURE_RUNS = repo_path(SPADE.paper.figure_runs)  # config key paper.figure_runs
PAPER_FIGURES_DIR = f"{PAPER_DIR}/figures"
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
PAPER_FIGURE_REPORTED = {"fig18": REPORTED_DIR / "quoted_numbers.csv"}


def paper_figure_files(stem):
    """The three outputs of a figure: PDF, PNG and the provenance sidecar of the PDF."""
    return {
        "pdf": f"{PAPER_FIGURES_DIR}/{stem}.pdf",
        "png": f"{PAPER_FIGURES_DIR}/{stem}.png",
        "provenance": f"{PAPER_FIGURES_DIR}/{stem}.pdf.provenance.json",
    }


def paper_figure_reported(figure):
    return [str(PAPER_FIGURE_REPORTED[figure])] if figure in PAPER_FIGURE_REPORTED else []


def paper_figure_configured_run(figure):
    def inputs(wildcards):
        mapped = _paper_figures.figure_runs(_paper_figures.load_figure_runs(FIGURE_RUNS), figure)
        evals = any(k in ("eval", "selected") for k in _paper_figures._kinds(figure))
        return [
            path
            for run in PAPER_BUILT_RUNS
            if run in mapped
            for path in (run_suite_files(run) if evals else [OUT.run_summary(run)])
        ]

    return inputs


def paper_figure_fingerprint(figure):
    def fingerprint(wildcards):
        runs = _paper_figures.figure_runs(_paper_figures.load_figure_runs(FIGURE_RUNS), figure)
        return _paper_figures.run_fingerprint(RUNS_ROOT, [r for r in runs if r not in PAPER_BUILT_RUNS], figure)

    return fingerprint


# ----- quoted numbers (rules/paper_numbers.smk) -------------------------------------------------------------------
NUMBER_RUNS = repo_path(SPADE.paper.number_runs)  # config key paper.number_runs
PAPER_NUMBERS_DIR = f"{PAPER_DIR}/numbers"
PAPER_NUMBER_GROUPS = _paper_numbers.GROUPS


def paper_number_files(group):
    tex = f"{PAPER_NUMBERS_DIR}/{group}.tex"
    return {"tex": tex, "provenance": f"{tex}.provenance.json"}


def paper_number_reported(group):
    return str(REPORTED_DIR / _paper_numbers.GROUP_REPORTED[group])


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
        return _paper_numbers.run_fingerprint(RUNS_ROOT, [r for r in runs if r not in PAPER_BUILT_RUNS], group)

    return fingerprint


# ----- the environment-source comparison (rules/paper_comparison.smk) ---------------------------------------------
COMPARISON_RUNS = repo_path(SPADE.paper.comparison_runs)  # config key paper.comparison_runs
COMPARISON_TABLE_STEM = f"{PAPER_TABLES_DIR}/env_sources"
COMPARISON_FIGURE_STEM = f"{PAPER_FIGURES_DIR}/env_sources"


def comparison_table_files():
    """The three outputs of the comparison table: Markdown, LaTeX and the provenance sidecar of the Markdown file."""
    return {
        "md": f"{COMPARISON_TABLE_STEM}.md",
        "tex": f"{COMPARISON_TABLE_STEM}.tex",
        "provenance": f"{COMPARISON_TABLE_STEM}.md.provenance.json",
    }


def comparison_figure_files():
    """The three outputs of the comparison figure: PDF, PNG and the provenance sidecar of the PDF."""
    return {
        "pdf": f"{COMPARISON_FIGURE_STEM}.pdf",
        "png": f"{COMPARISON_FIGURE_STEM}.png",
        "provenance": f"{COMPARISON_FIGURE_STEM}.pdf.provenance.json",
    }


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


# ----- the PDF (rules/paper_pdf.smk) ------------------------------------------------------------------------------
PAPER_MAIN_TEX = str(Path(workflow.basedir) / "paper" / "main.tex")
PAPER_PDF = f"{PAPER_DIR}/main.pdf"
PAPER_LATEX_ENGINE = SPADE.paper.latex_engine
PAPER_ENGINE_FOUND = _shutil.which(PAPER_LATEX_ENGINE) is not None


def paper_pdf_inputs():
    """Every generated file paper/main.tex inputs: the tables' .tex, the figures' .pdf, the numbers' .tex."""
    tables = [paper_table_files(table)["tex"] for table in PAPER_TABLE_STEMS]
    figures = [paper_figure_files(stem)["pdf"] for stem in PAPER_FIGURES_PRESENT.values()]
    numbers = [paper_number_files(group)["tex"] for group in PAPER_NUMBER_GROUPS]
    return tables + figures + numbers


# ----- the toy targets (rules/toy_ablations.smk, rules/toy_tool_use.smk) ------------------------------------------
TOY_ABLATION_TABLES = ["table3", "table6"]
TOY_ABLATION_FIGURES = ["fig6", "fig10", "fig11", "fig13", "fig14", "fig18"]
TOY_TOOL_USE_TABLES = ["table2"]
TOY_TOOL_USE_FIGURES = ["fig1_right"]
TOY_TOOL_USE_NUMBERS = ["tool_use_gain"]


def toy_ablation_outputs():
    """The runs' suites (curves, eval.final at the last checkpoint), the two tables, the figures and the comparison."""
    files = [path for run in MAIN_RUNS + TOY_ABLATIONS for path in run_suite_files(run)]
    files += [path for table in TOY_ABLATION_TABLES for path in paper_table_files(table).values()]
    files += [
        path for figure in TOY_ABLATION_FIGURES for path in paper_figure_files(PAPER_FIGURE_STEMS[figure]).values()
    ]
    return files + rules.paper_comparison.input


def toy_tool_use_outputs():
    """The run's suite (curves, eval.final at the base model and the last checkpoint) and the artifacts reading it."""
    files = [path for run in TOY_TOOL_USE for path in run_suite_files(run)]
    files += [path for table in TOY_TOOL_USE_TABLES for path in paper_table_files(table).values()]
    files += [
        path for figure in TOY_TOOL_USE_FIGURES for path in paper_figure_files(PAPER_FIGURE_STEMS[figure]).values()
    ]
    return files + [path for group in TOY_TOOL_USE_NUMBERS for path in paper_number_files(group).values()]


def _evaluates_like_the_main_run(run):
    """Whether a toy ablation agrees with the main run on every config key an evaluation reads (eval_config_hash, for
    every benchmark): then its step 0, the shared base model, gives the main run's item records exactly."""
    return all(
        _settings_hash(asdict(RUNS[run]), [*EVAL_SHARED, f"eval.{name}"])
        == _settings_hash(asdict(SPADE), [*EVAL_SHARED, f"eval.{name}"])
        for name in BENCHMARKS
    )


BASE_SHARING = [run for run in TOY_ABLATIONS if _evaluates_like_the_main_run(run)]

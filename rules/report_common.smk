# Snakemake's report: `snakemake --report results/report.html` (or results/report.zip). No rules here (the target
# report_contents is in the Snakefile): the functions that register the rules' tables and figures with report(), and
# what the captions read.
#
# Each registered output names a caption (paper/captions/<kind>.rst, one per kind of artifact) and a category of
# spade.paper.workflow_report.CATEGORIES. Snakemake renders a caption as a Jinja2 template with the job's input, output,
# params, wildcards and rule and with the workflow config; what it must say beyond that (each run's job config file,
# the config hash its results record, its scale; the runs behind a paper artifact, from its provenance sidecar) is put
# under the config key `report` when the command line asks for a report (report_facts), never otherwise.
#
# `snakemake --report FILE` with no target reports what exists: report_contents, the default target then, asks for
# the registered outputs of every job whose registered outputs all exist (Snakemake refuses a report where a
# registered output of a job in the DAG is missing). Naming targets (`snakemake --report FILE paper`) reports those.

from snakemake.io import apply_wildcards as _apply_wildcards
from snakemake.io import is_flagged as _is_flagged

from spade.paper import workflow_report as _workflow_report

REPORT_ASKED, REPORT_ALONE = _workflow_report.report_mode(sys.argv[1:])
REPORT_KEY = _workflow_report.REPORT_KEY  # the config key of the captions' facts (set in the Snakefile)
CAPTION_DIR = Path(workflow.basedir) / "paper" / "captions"

PAPER_TABLE_TITLES = {
    "table1": "Table 1: games",
    "table2": "Table 2: tool use",
    "table3": "Table 3: ablations",
    "table5": "Table 5: hyperparameters",
    "table6": "Table 6: all ablations",
    "table7": "Table 7: environment quality by phase",
    "table8": "Table 8: diversity",
}
PAPER_FIGURE_TITLES = {
    "fig1_middle": "Figure 1 (middle): games transfer",
    "fig1_right": "Figure 1 (right): tool-use transfer",
    "fig5": "Figure 5: transfer curves",
    "fig6": "Figure 6: learnable share",
    "fig7": "Figure 7: t-SNE of environments",
    "fig10": "Figure 10: ablation curves",
    "fig11": "Figure 11: designer reward",
    "fig12": "Figure 12: model size",
    "fig13": "Figure 13: curriculum breadth",
    "fig14": "Figure 14: six vs two skills",
    "fig16": "Figure 16: reward levels",
    "fig17": "Figure 17: per-skill win rates",
    "fig18": "Figure 18: windowed diversity",
}


def reported(path, caption, category, subcategory=None):
    """`path` registered for the report, with the caption paper/captions/<caption>.rst, in `category` (one of
    spade.paper.workflow_report.CATEGORIES) and `subcategory` (may hold the rule's wildcards, e.g. "{run}")."""
    if category not in _workflow_report.CATEGORIES:
        raise WorkflowError(
            f"report category {category!r} of {path} is not one of {', '.join(_workflow_report.CATEGORIES)}"
        )
    if not (CAPTION_DIR / f"{caption}.rst").is_file():
        raise WorkflowError(f"the caption of {path}, {CAPTION_DIR / caption}.rst, does not exist")
    return report(path, caption=f"../paper/captions/{caption}.rst", category=category, subcategory=subcategory)


def reported_files(files, caption, category, subcategory=None):
    """reported() for each named output of `files` (name -> path), one caption for all."""
    return {name: reported(path, caption, category, subcategory) for name, path in files.items()}


def paper_table_category(table):
    return "Ablations" if table in TOY_ABLATION_TABLES else "Paper tables"


def paper_figure_category(figure):
    return "Ablations" if figure in TOY_ABLATION_FIGURES else "Paper figures"


def _report_jobs():
    """[(rule, [registered outputs])], one entry per job that can make registered outputs: the rules without
    wildcards once, the rules with the wildcard `run` once for each configured run."""
    jobs = []
    for candidate in workflow.rules:
        flagged = [file for file in candidate.output if _is_flagged(file, "report")]
        if not flagged:
            continue
        if not candidate.wildcard_names:
            jobs.append((candidate.name, [str(file) for file in flagged]))
            continue
        if candidate.wildcard_names != {"run"}:
            raise WorkflowError(
                f"rule {candidate.name} registers outputs for the report with wildcards "
                f"{sorted(candidate.wildcard_names)}; report_contents knows only the wildcard run"
            )
        for run in RUNS:
            paths = [_apply_wildcards(file, {"run": run}) for file in flagged]
            if candidate.is_producer(paths[0]):
                jobs.append((candidate.name, paths))
    return jobs


def report_contents(wildcards):
    """The input of report_contents: the registered outputs of every job whose registered outputs all exist. A job
    with some of them missing is left out, saying which; nothing at all to report is an error."""
    present, partial = [], []
    for rule, paths in _report_jobs():
        missing = [path for path in paths if not os.path.exists(path)]
        if not missing:
            present += paths
        elif len(missing) < len(paths):
            partial.append(f"{rule} ({', '.join(missing)} missing)")
    if partial:
        print(
            "report: left out, as some of their registered outputs are missing (rerun them to include them): "
            + "; ".join(partial),
            file=sys.stderr,
        )
    if not present:
        raise WorkflowError(
            f"nothing to report: none of the workflow's tables and figures exists under {OUT.root}/ yet; run "
            "`snakemake` (the toy run), `snakemake eval_toy`, `snakemake paper` or `snakemake env_cards` first"
        )
    return present


def report_facts():
    """The value of the config key `report` that the captions read (spade.paper.workflow_report.report_facts)."""
    if REPORT_KEY in config:
        raise WorkflowError(f"config key {REPORT_KEY!r} is reserved for the report's captions; remove it")
    sidecars = [path for _, paths in _report_jobs() for path in paths if path.endswith(".provenance.json")]
    configured = {
        name: (RUN_CONFIG[name], settings.model_card, settings.selfplay.total_steps) for name, settings in RUNS.items()
    }
    try:
        return _workflow_report.report_facts(
            OUT.root,
            configured,
            MAIN_RUNS,
            sidecars,
            workflow.configfiles,
            WORKFLOW_CONFIG_FILE,
            workflow.basedir,
        )
    except ReportInputError as exc:
        raise WorkflowError(f"report: {exc}")

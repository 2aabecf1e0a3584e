"""What the captions of Snakemake's report say about each artifact: its runs, their config, their scale.

``snakemake --report results/report.html`` (or ``results/report.zip``) collects every table and figure that the
workflow registered with Snakemake's ``report()`` flag (``rules/report_common.smk``), in the categories of
:data:`CATEGORIES`. Snakemake renders each caption (``paper/captions/<kind>.rst``) as a Jinja2 template, with the job's
``snakemake.input``, ``output``, ``params``, ``wildcards``, ``rule`` and the workflow config (``snakemake.config``);
the report's global description (``paper/captions/workflow.rst``) gets the config alone.

A template cannot read files, so what a caption must say but cannot find in that context is computed here, once,
when the command line asks for a report, and put under the config key ``report`` (:func:`report_facts`):

* for every configured run: its job config file (``<results_dir>/configs/<run>-<hash>.yaml``, the file its jobs
  read), the config hash its results record (``summary.json``, ``provenance.config_hash``), and its scale (model
  card and steps) with whether it is toy scale, i.e. not the paper's backbone trained for the paper's step budget
  (:func:`spade.paper.scale.comparable`);
* for every registered provenance sidecar that exists (``<artifact>.provenance.json``): the runs it names, the config
  hashes their results recorded, their scales, and the artifact's own toy-scale banner.

Nothing here changes a job: the config key exists only in the process that writes the report.
"""

from __future__ import annotations

from pathlib import Path

from spade.paper.report import ReportInputError, read_json

REPORT_KEY = "report"  # the config key the captions read (never a key of a run config: spade.config rejects it)
CATEGORIES = ("Run", "Evaluation", "Paper tables", "Paper figures", "Paper text", "Ablations",
              "Environment sources", "Environment cards")


def report_mode(argv: list) -> tuple[bool, bool]:
    """(asked, alone) from Snakemake's command line: whether it asks for a report (``--report [FILE]``), and whether
    it asks for nothing else (no ``--report-after-run``), so that the report covers what exists now."""
    asked = any(arg == "--report" or arg.startswith("--report=") for arg in argv)
    return asked, asked and "--report-after-run" not in argv


def paper_backbones() -> list:
    from spade.paper.figures import SIZE_BACKBONES

    return list(SIZE_BACKBONES.values())


def paper_setting() -> str:
    """The paper's scale in words: its backbones and step budget."""
    from spade.paper.scale import paper_steps

    *first, last = paper_backbones()
    return f"{', '.join(first)} or {last} for {paper_steps()} steps"


def scale_of(run: str, model_card: str | None, steps: int | None, rehearsal: str | None = None) -> tuple[bool, str]:
    """(toy, label): whether a run of this model card and step count (a rehearsal run: the tiny model it trained) is
    below the paper's scale, and its label."""
    from spade.paper.scale import RunScale, comparable

    scale = RunScale(run, model_card, steps, rehearsal)
    return not any(comparable(scale, backbone) for backbone in paper_backbones()), scale.label()


def _summary(runs_root: Path, run: str) -> dict | None:
    path = runs_root / run / "summary.json"
    if not path.is_file():
        return None
    summary = read_json(path)
    if not isinstance(summary, dict):
        raise ReportInputError(f"{path} holds no JSON object")
    return summary


def run_facts(runs_root: str | Path, run: str, config_file: str = "", model_card: str | None = None,
              total_steps: int | None = None) -> dict:
    """What a caption says about one run. A trained run's scale and config hash come from its ``summary.json``;
    an untrained configured run's scale from its config (``model_card``, ``total_steps``)."""
    runs_root = Path(runs_root)
    summary = _summary(runs_root, run)
    trained = summary is not None
    if trained:
        model_card = summary.get("model_card") or model_card
        steps = summary.get("steps")
        total_steps = steps if isinstance(steps, int) else total_steps
    provenance = (summary or {}).get("provenance") or {}
    from spade.paper.scale import rehearsal_model

    toy, label = scale_of(run, model_card, total_steps, rehearsal_model(summary or {}))
    return {"name": run, "folder": (runs_root / run).as_posix(), "config_file": str(config_file or ""),
            "config_hash": str(provenance.get("config_hash") or ""), "trained": trained, "scale": label, "toy": toy}


def _hashes(value) -> list:
    values = value if isinstance(value, list) else [value]
    return [str(v) for v in values if v not in (None, "")]


def sidecar_facts(sidecar: str | Path, runs_root: str | Path) -> dict:
    """What a caption says about the runs behind an artifact, from its provenance sidecar: the runs it names (key
    ``runs``: run -> provenance, or ``run`` for a single-run artifact), the config hashes recorded in the results it
    read, each run's scale, and the artifact's toy-scale banner (``banner`` or ``scale_note``)."""
    sidecar, runs_root = Path(sidecar), Path(runs_root)
    data = read_json(sidecar)
    if not isinstance(data, dict):
        raise ReportInputError(f"{sidecar} holds no JSON object")
    named = data.get("runs")
    if not isinstance(named, dict):
        named = {data["run"]: {}} if isinstance(data.get("run"), str) else {}
    runs = []
    for name in sorted(named):
        summary = _summary(runs_root, name) or {}
        record = named[name] if isinstance(named[name], dict) else {}
        hashes = _hashes(record.get("config_hash")) or _hashes((summary.get("provenance") or {}).get("config_hash"))
        steps = summary.get("steps")
        toy, label = scale_of(name, summary.get("model_card"), steps if isinstance(steps, int) else None)
        runs.append({"name": name, "config_hashes": ", ".join(dict.fromkeys(hashes)) or "not recorded",
                     "scale": label, "toy": toy})
    banner = data.get("banner") or data.get("scale_note") or ""
    return {"sidecar": sidecar.as_posix(), "runs": runs, "banner": str(banner) if banner else "",
            "toy": any(run["toy"] for run in runs)}


def _relative(path, repo: str) -> str:
    """``path`` relative to ``repo`` when inside it, else as given."""
    if repo and Path(path).is_absolute() and Path(path).is_relative_to(repo):
        return Path(path).relative_to(repo).as_posix()
    return str(path)


def report_facts(results_dir: str, configured: dict, main_runs: list, sidecars: list, config_files: list,
                 workflow_config_file: str, repo: str = "") -> dict:
    """The value of the config key ``report``.

    ``configured``: run name -> (job config file, model card, total steps) of every configured run; ``main_runs``:
    the runs of the default target; ``sidecars``: the registered provenance sidecars (those that exist are read);
    ``config_files``: the workflow's config files; ``workflow_config_file``: the job config file of the
    workflow-wide rules; ``repo``: the repository's folder, which the captions strip from the paths of its files.
    ReportInputError on a malformed summary or sidecar."""
    runs_root = Path(results_dir) / "runs"
    runs = {name: run_facts(runs_root, name, *settings) for name, settings in configured.items()}
    artifacts = {}
    for sidecar in sidecars:
        if Path(sidecar).is_file():
            artifacts[str(sidecar)] = facts = sidecar_facts(sidecar, runs_root)
            for run in facts["runs"]:  # a run read but not configured here (another config's run)
                if run["name"] not in runs:
                    runs[run["name"]] = run_facts(runs_root, run["name"])
    present = [run for run in runs.values() if run["trained"]]
    toy = [run["name"] for run in present if run["toy"]]
    return {
        "repo": f"{Path(repo).as_posix()}/" if repo else "",
        "results_dir": results_dir,
        "config_files": [_relative(path, repo) for path in config_files],
        "workflow_config_file": workflow_config_file,
        "main_runs": list(main_runs),
        "runs": runs,
        "artifacts": artifacts,
        "paper_setting": paper_setting(),
        "toy_runs": toy,
        "paper_runs": [run["name"] for run in present if not run["toy"]],
        "scale": ("none" if not present else "toy" if len(toy) == len(present) else "paper" if not toy else "mixed"),
    }

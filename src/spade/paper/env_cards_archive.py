"""A run's environment archives as records: every environment slot of every archived set, every rejected
candidate matched to the slot and attempt whose report it is, the per-step metrics and the run's step budget.

Read by ``load_run`` from ``<run>/envs/set_<step>.json``, ``<run>/rejected/<sha12>/``, ``<run>/metrics.jsonl`` and
``<run>/summary.json``; a malformed file raises ``ReportInputError`` naming it. What the environment cards and the
environment browser show (``spade.paper.env_cards``) is drawn from these records only.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from spade.paper.report import ReportInputError, read_json, read_metrics

_SET_FILE = re.compile(r"^set_(\d+)\.json$")
_REQUIRED_ENV_KEYS = ("env_id", "step", "valid")


@dataclass
class EnvRecord:
    """One slot of an archived environment set, as written, with where it came from."""

    data: dict
    file: Path
    index: int  # position in the archive's "environments" list
    window_end: int | None = None  # first step after this set's window (the next set's step; None: run end unknown)

    @property
    def env_id(self) -> str:
        return str(self.data["env_id"])

    @property
    def step(self) -> int:
        return int(self.data["step"])

    @property
    def valid(self) -> bool:
        return bool(self.data.get("valid"))

    @property
    def source(self) -> str:
        return str(self.data.get("source") or "designer")

    @property
    def designer_written(self) -> bool:
        return self.valid and self.source == "designer"

    @property
    def anchor(self) -> str:
        """The HTML id of this slot on the browser page."""
        return "env-" + re.sub(r"[^A-Za-z0-9_-]", "_", f"{self.step:05d}-{self.index}-{self.env_id}")


@dataclass
class Rejection:
    """A rejected candidate kept by ``store_rejection``, matched to the slot and attempt whose report it is."""

    folder: Path
    report: dict
    raw: str
    code: str | None
    slot: EnvRecord | None = None
    attempt: int | None = None  # 1-based attempt of that slot

    @property
    def anchor(self) -> str:
        return "rejected-" + re.sub(r"[^A-Za-z0-9_-]", "_", self.folder.name)


@dataclass
class RunArchive:
    run: str
    run_dir: Path
    sets: list  # [(step, path, [EnvRecord])] in step order
    rejected: list  # [Rejection]
    metrics: dict  # step -> metrics record
    total_steps: int | None
    model_card: str | None
    inputs: list = field(default_factory=list)  # every file read
    rehearsal_model: str | None = None  # a rehearsal run's tiny model (spade.paper.scale.rehearsal_model)

    @property
    def envs(self) -> list:
        return [env for _, _, envs in self.sets for env in envs]

    @property
    def phase_end(self) -> int:
        """The step budget the phases split: the run's, else one past the last archived set."""
        if self.total_steps is not None:
            return self.total_steps
        return max((step for step, _, _ in self.sets), default=-1) + 1


def _read_json_file(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path} ({what}) is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ReportInputError(f"{path} ({what}) is not UTF-8 text: {exc}") from None


def _read_sets(run_dir: Path) -> list:
    folder = run_dir / "envs"
    if not folder.is_dir():
        raise ReportInputError(f"run folder {run_dir} has no envs/ folder: no environment set was archived "
                               "(is it a run folder, and has its training run?)")
    found = sorted((int(m.group(1)), path) for path in folder.iterdir() if (m := _SET_FILE.match(path.name)))
    if not found:
        raise ReportInputError(f"{folder} holds no environment-set archive (set_<step>.json)")
    sets = []
    for _, path in found:
        data = _read_json_file(path, "environment-set archive")
        if not isinstance(data, dict) or not isinstance(data.get("environments"), list):
            raise ReportInputError(f"{path} is not an environment-set archive (no 'environments' list)")
        records = []
        for index, env in enumerate(data["environments"]):
            if not isinstance(env, dict):
                raise ReportInputError(f"{path}: environments[{index}] is not an object")
            missing = [key for key in _REQUIRED_ENV_KEYS if key not in env]
            if missing:
                raise ReportInputError(f"{path}: environments[{index}] lacks {', '.join(map(repr, missing))}")
            if not isinstance(env["step"], int) or isinstance(env["step"], bool):
                raise ReportInputError(f"{path}: environments[{index}] has step {env['step']!r}, not an integer")
            records.append(EnvRecord(env, path, index))
        steps = {record.step for record in records}
        if len(steps) > 1:
            raise ReportInputError(f"{path}: its environments name several steps {sorted(steps)}; one set has one")
        step = steps.pop() if steps else int(_SET_FILE.match(path.name).group(1))
        sets.append((step, path, records))
    sets.sort(key=lambda item: item[0])
    return sets


_REPORT_MATCH_KEYS = ("valid", "reason", "message", "isolation", "class_name", "kind", "changes", "checks",
                      "code_sha256", "elapsed_ms")


def _report_key(report: dict) -> str:
    return json.dumps({key: report.get(key) for key in _REPORT_MATCH_KEYS}, sort_keys=True)


def _read_rejected(run_dir: Path, envs: list) -> tuple[list, list]:
    folder = run_dir / "rejected"
    if not folder.is_dir():
        return [], []
    # a slot's report of each attempt is the same to_dict() that store_rejection wrote: match them exactly
    attempts = {}
    for env in envs:
        for number, report in enumerate(env.data.get("reports") or [], start=1):
            if isinstance(report, dict) and not report.get("valid"):
                attempts.setdefault(_report_key(report), (env, number))
    rejected, inputs = [], []
    for entry in sorted(folder.iterdir()):
        if not entry.is_dir():
            continue
        report_path = entry / "report.json"
        if not report_path.is_file():
            raise ReportInputError(f"rejected candidate {entry} has no report.json")
        report = _read_json_file(report_path, "validation report of a rejected candidate")
        if not isinstance(report, dict) or "reason" not in report:
            raise ReportInputError(f"{report_path} is not a validation report (no 'reason')")
        raw_path, code_path = entry / "raw.txt", entry / "code.py"
        raw = raw_path.read_text(encoding="utf-8", errors="replace") if raw_path.is_file() else ""
        code = code_path.read_text(encoding="utf-8", errors="replace") if code_path.is_file() else None
        inputs += [p for p in (report_path, raw_path, code_path) if p.is_file()]
        slot, attempt = attempts.get(_report_key(report), (None, None))
        rejected.append(Rejection(entry, report, raw, code, slot, attempt))
    rejected.sort(key=lambda r: (r.slot.step if r.slot else math.inf, r.slot.env_id if r.slot else "",
                                 r.attempt or 0, r.folder.name))
    return rejected, inputs


def archive_files(run_dir: str | Path) -> list:
    """The files of a run that the cards and the browser read (for the workflow's fingerprint of a run it does not
    build): the set archives, the rejected candidates' reports, metrics.jsonl and summary.json, those that exist."""
    folder = Path(run_dir)
    files = sorted(folder.glob("envs/set_*.json")) + sorted(folder.glob("rejected/*/report.json"))
    return files + [path for path in (folder / "metrics.jsonl", folder / "summary.json") if path.is_file()]


def load_run(run_dir: str | Path) -> RunArchive:
    """Everything the cards and the browser show, read from ``run_dir``; ReportInputError names a bad file."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportInputError(f"run folder {run_dir} does not exist")
    sets = _read_sets(run_dir)
    summary_path = run_dir / "summary.json"
    summary = read_json(summary_path) if summary_path.is_file() else {}
    if not isinstance(summary, dict):
        raise ReportInputError(f"{summary_path} is not a JSON object")
    steps = summary.get("steps")
    total = steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None
    for number, (step, _, records) in enumerate(sets):
        end = sets[number + 1][0] if number + 1 < len(sets) else total
        for record in records:
            record.window_end = end
    metrics_path = run_dir / "metrics.jsonl"
    metrics = {record["step"]: record for record in read_metrics(metrics_path)} if metrics_path.is_file() else {}
    envs = [env for _, _, records in sets for env in records]
    rejected, rejected_inputs = _read_rejected(run_dir, envs)
    inputs = [path for _, path, _ in sets] + [p for p in (summary_path, metrics_path) if p.is_file()] + rejected_inputs
    from spade.paper.scale import rehearsal_model

    return RunArchive(str(summary.get("run") or run_dir.name), run_dir, sets, rejected, metrics, total,
                      summary.get("model_card"), inputs, rehearsal_model(summary))

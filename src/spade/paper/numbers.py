"""The numbers the paper's text quotes, each written as a LaTeX macro beside the paper's own value.

One script per group of numbers (``paper/scripts/num_<group>.py``) writes ``<out>.tex``: a comment block
(which script and rule wrote it, from which runs, and the exact definition of every number), then per number
two macros, ``\\Num<Name>`` (ours) and ``\\Num<Name>Reported`` (the paper's). The logic lives here; the
values come from the machinery of the tables and figures, reused, never re-implemented:

* ``games_gain``: per backbone, the 8-benchmark average (percent) of base, SPADE, Fixed-env GRPO and
  Fixed-env RLVE, exactly as the "Avg." column of Table 1 (:data:`spade.paper.benchmark_tables.TABLE1`, its column
  metrics and step rules ``selected``/``last``/``base``/<step>), SPADE's gain over base and its margin over
  each baseline (points). Reported: ``table1_games.csv`` (margins: the difference of the two reported averages).
* ``tool_use_gain``: per backbone, Table 2's average (mean of the BFCL, tau2 and ACEBench averages) of base
  and SPADE (tool use) and the gain. Reported: ``table2_tool_use.csv``.
* ``designer_reward``: Table 6's 8-benchmark average with the hint-regret designer reward (SPADE) and with
  EMA learning potential, and the difference. Reported: ``table6_ablations_full.csv``.
* ``learnable_share``: Table 7's learnable share per phase: learnable slots (RA win rate in [0.2, 0.8]) / all
  slots of the environment sets regenerated in the phase, empty slots counting 0
  (:func:`spade.paper.env_tables.env_quality`; the 16-step windows of figure 6 pooled over the phase). Reported:
  ``table7_env_quality.csv``.
* ``vendi_per_n``: Table 8's SBERT Vendi/n with and without corpus grounding
  (:func:`spade.paper.env_tables.diversity`) and the number of environments. Reported: ``table8_diversity.csv``.
* ``formula_reveal``: per phase, the share (percent) of physics environments whose first observation
  reveals the governing formula (:func:`spade.analysis.formula_reveal_rate` on
  :func:`spade.analysis.first_observation_text`; valid designer-written environments of the sets regenerated
  in the phase; physics = the archive row's ``domain`` names physics, else the keyword label
  :func:`spade.analysis.is_physics_text` of the environment's code). Reported: ``quoted_numbers.csv``.
* ``reward_levels``: mean distinct reward levels per environment, and mean strictly partial (0 < r < 1)
  levels, early vs late (:func:`spade.analysis.reward_level_rows` and :func:`spade.analysis.phase_mean`, the
  rows of figure 16: every valid, played environment). Reported: ``quoted_numbers.csv``.
* ``valid_env_rate``: the valid-environment rate of the designer's attempts with its Wilson interval
  (:func:`spade.analysis.valid_env_rate_from_sets`) and the executability of raw designer output, from the
  per-attempt validation reports (:func:`attempt_executability`). Reported: ``quoted_numbers.csv``.

Which run stands for what is set in the run mapping ``paper/number_runs.yaml`` (its header documents every
key; :func:`load_number_runs` validates it). A number whose run is not mapped or has no folder prints
``\\textit{not run}``; one whose run exists but lacks the data prints ``\\textit{no data}``. Both are listed
under ``missing`` in the sidecar with the reason. A number is never taken from elsewhere.

Every ``.tex`` gets a provenance sidecar ``<out>.provenance.json`` (:func:`spade.paper.report.provenance_record`):
the files read with their SHA-256, each run's config hash, git commit and seed, and per number its value,
the text shown, the reported value and where each came from.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spade.paper import table_runs
from spade.paper.benchmark_tables import TABLE1, TABLE2, TABLE6, BenchmarkTable, ours_row
from spade.paper.env_tables import TABLE7_SIGNALS, default_embedders, diversity, env_quality, env_sets_with_paths
from spade.paper.report import (
    NOT_RUN,
    ReportInputError,
    latex_escape,
    provenance_record,
    read_yaml,
    sidecar_path,
    write_json_atomic,
    write_text_atomic,
)
from spade.paper.scale import PAPER_30B, banner, off_scale
from spade.paper.table_runs import (
    BALANCE_BY,
    COLUMN_METRICS,
    VENDI_DEFAULTS,
    ResultIndex,
    check_keys,
    load_results,
    mapping_error,
    mapping_int,
    mapping_runs,
    mapping_step_rule,
    run_provenance,
)
from spade.paper.tables import NO_DATA, read_reported, reported_number, shown_path

PERCENT = 100.0
PCT = r"\,\%"  # the unit printed after a percentage
QUOTED_CSV = "quoted_numbers.csv"  # numbers that appear only in the paper's text
REPORTED_NONE = "---"  # the paper gives no value for this number


# ----- the run mapping (paper/number_runs.yaml) ---------------------------------------------------------------
GROUPS = ("games_gain", "tool_use_gain", "designer_reward", "learnable_share", "vendi_per_n", "formula_reveal",
          "reward_levels", "valid_env_rate")
_TOP_KEYS = ("default_step", "phases", "numbers")
_SECTION_KEYS = {
    "games_gain": ("backbones",),
    "tool_use_gain": ("backbones",),
    "designer_reward": ("hint_regret", "learning_potential"),
    "learnable_share": ("run", "phases"),
    "vendi_per_n": ("corpus", "no_corpus", "field", "vendi"),
    "formula_reveal": ("run", "phases", "physics_min_terms"),
    "reward_levels": ("run", "phases"),
    "valid_env_rate": ("run", "confidence"),
}
_BACKBONE_ROLES = {"games_gain": ("base", "spade", "fixed_env_grpo", "fixed_env_rlve"),
                   "tool_use_gain": ("base", "spade")}
_ROLE_KEYS = ("run", "step")
_PHASE_NAME = re.compile(r"^[a-z]+$")


def _roles(path, key: str, value, default_step) -> dict:
    """A run role: a run name, a list of replicate run names, null, or {run: ..., step: ...}."""
    if isinstance(value, dict):
        check_keys(path, key, value, _ROLE_KEYS)
        if "run" not in value:
            raise mapping_error(path, f"{key}.run", "is missing (write `run: null` for a role we have no run for)")
        step = mapping_step_rule(path, f"{key}.step", value.get("step", default_step))
        return {"runs": mapping_runs(path, f"{key}.run", value["run"]), "step": step}
    return {"runs": mapping_runs(path, key, value), "step": default_step}


def _one_run(path, key: str, value) -> str | None:
    runs = mapping_runs(path, key, value)
    if len(runs) > 1:
        raise mapping_error(path, key, f"must name one run (or null), got {runs!r}")
    return runs[0] if runs else None


def _phases(path, key: str, value) -> dict[str, tuple[int, int]]:
    if not isinstance(value, dict) or not value:
        raise mapping_error(path, key, f"must map phase names (early, mid, late) to [first step, last step], got {value!r}")
    parsed = {}
    for name, bounds in value.items():
        where = f"{key}.{name}"
        if not isinstance(name, str) or not _PHASE_NAME.match(name):
            raise mapping_error(path, where, "a phase name must be lower-case letters (it becomes part of a macro name)")
        if not (isinstance(bounds, list) and len(bounds) == 2):
            raise mapping_error(path, where, f"must be [first step, last step], got {bounds!r}")
        first, last = (mapping_int(path, where, b, 0) for b in bounds)
        if first > last:
            raise mapping_error(path, where, f"first step {first} is after last step {last}")
        parsed[name] = (first, last)
    return parsed


def _section(path, name: str, section, default_step, phases) -> dict:
    key = f"numbers.{name}"
    if not isinstance(section, dict):
        raise mapping_error(path, key, f"must be a mapping, got {section!r}")
    check_keys(path, key, section, _SECTION_KEYS[name])
    if name in _BACKBONE_ROLES:
        backbones = section.get("backbones")
        if not isinstance(backbones, dict) or not backbones:
            raise mapping_error(path, f"{key}.backbones", f"must map backbone names (4B, 8B, 30B) to roles, got {backbones!r}")
        parsed = {}
        for size, entry in backbones.items():
            where = f"{key}.backbones.{size}"
            word = macro_word(str(size))
            if not isinstance(entry, dict):
                raise mapping_error(path, where, f"must be a mapping, got {entry!r}")
            allowed = ("reported",) + _BACKBONE_ROLES[name]
            check_keys(path, where, entry, allowed)
            missing = [k for k in allowed if k not in entry]
            if missing:
                raise mapping_error(path, f"{where}.{missing[0]}", "is missing (write null for a role we have no run for)")
            if not isinstance(entry["reported"], str) or not entry["reported"].strip():
                raise mapping_error(path, f"{where}.reported", f"must be the backbone as the reported CSV names it, got "
                              f"{entry['reported']!r}")
            roles = {role: _roles(path, f"{where}.{role}", entry[role], "base" if role == "base" else default_step)
                     for role in _BACKBONE_ROLES[name]}
            parsed[str(size)] = {"word": word, "reported": entry["reported"], "roles": roles}
        return {"backbones": parsed}
    if name == "designer_reward":
        for role in _SECTION_KEYS[name]:
            if role not in section:
                raise mapping_error(path, f"{key}.{role}", "is missing (write null for a role we have no run for)")
        return {role: _roles(path, f"{key}.{role}", section[role], default_step) for role in _SECTION_KEYS[name]}
    if name == "vendi_per_n":
        vendi = section.get("vendi") or {}
        if not isinstance(vendi, dict):
            raise mapping_error(path, f"{key}.vendi", f"must be a mapping, got {vendi!r}")
        check_keys(path, f"{key}.vendi", vendi, tuple(VENDI_DEFAULTS))
        vendi = {**VENDI_DEFAULTS, **vendi}
        vendi["size"] = mapping_int(path, f"{key}.vendi.size", vendi["size"], 2)
        vendi["draws"] = mapping_int(path, f"{key}.vendi.draws", vendi["draws"], 1)
        vendi["seed"] = mapping_int(path, f"{key}.vendi.seed", vendi["seed"], 0)
        if vendi["balance_by"] not in BALANCE_BY:
            raise mapping_error(path, f"{key}.vendi.balance_by",
                          f"must be one of {', '.join(BALANCE_BY)}, got {vendi['balance_by']!r}")
        text_field = section.get("field", "code")
        if not isinstance(text_field, str) or not text_field:
            raise mapping_error(path, f"{key}.field", f"must be an archive field name, got {text_field!r}")
        for role in ("corpus", "no_corpus"):
            if role not in section:
                raise mapping_error(path, f"{key}.{role}", "is missing (write null for a role we have no run for)")
        return {"corpus": _one_run(path, f"{key}.corpus", section["corpus"]),
                "no_corpus": _one_run(path, f"{key}.no_corpus", section["no_corpus"]),
                "field": text_field, "vendi": vendi}
    if "run" not in section:
        raise mapping_error(path, f"{key}.run", "is missing (write `run: null` if we have no run for it)")
    out = {"run": _one_run(path, f"{key}.run", section["run"])}
    if name != "valid_env_rate":
        out["phases"] = _phases(path, f"{key}.phases", section["phases"]) if "phases" in section else phases
        if out["phases"] is None:
            raise mapping_error(path, f"{key}.phases", "is missing and the mapping has no top-level 'phases'")
    if name == "reward_levels" and not {"early", "late"} <= set(out["phases"]):
        raise mapping_error(path, f"{key}.phases", f"must name the phases early and late, got {', '.join(out['phases'])}")
    if name == "formula_reveal":
        out["physics_min_terms"] = mapping_int(path, f"{key}.physics_min_terms", section.get("physics_min_terms", 2), 1)
    if name == "valid_env_rate":
        confidence = section.get("confidence", 0.95)
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
            raise mapping_error(path, f"{key}.confidence", f"must be a number in (0, 1), got {confidence!r}")
        out["confidence"] = float(confidence)
    return out


def load_number_runs(path: str | Path) -> dict:
    """The validated run mapping of the quoted numbers (``paper/number_runs.yaml``; keys documented there).

    Returns ``{"path", "default_step", "phases", "numbers": {group: section}}``. A missing file, bad YAML, an
    unknown key or a bad value raises :class:`ReportInputError` naming the file, the key and the allowed keys.
    """
    path = Path(path)
    data = read_yaml(path, "number run mapping")
    if not isinstance(data, dict):
        raise ReportInputError(f"{path} must hold a mapping at the top level")
    check_keys(path, "", data, _TOP_KEYS)
    default_step = mapping_step_rule(path, "default_step", data.get("default_step", "selected"))
    phases = _phases(path, "phases", data["phases"]) if "phases" in data else None
    numbers = data.get("numbers") or {}
    if not isinstance(numbers, dict):
        raise mapping_error(path, "numbers", f"must be a mapping of number group -> section, got {numbers!r}")
    check_keys(path, "numbers", numbers, GROUPS)
    parsed = {name: _section(path, name, section, default_step, phases) for name, section in numbers.items()}
    return {"path": str(path), "default_step": default_step, "phases": phases, "numbers": parsed}


def number_section(mapping: dict, group: str) -> dict:
    section = mapping["numbers"].get(group)
    if section is None:
        raise ReportInputError(f"{mapping['path']}: key 'numbers.{group}' is missing (allowed groups: "
                               f"{', '.join(GROUPS)})")
    return section


def group_runs(mapping: dict, group: str) -> list[str]:
    """Every run name the mapping gives for ``group`` (sorted; [] when the group has no section)."""
    section = mapping["numbers"].get(group)
    if section is None:
        return []
    runs: set[str] = set()
    if "backbones" in section:
        runs |= {r for entry in section["backbones"].values() for role in entry["roles"].values() for r in role["runs"]}
    elif group == "designer_reward":
        runs |= {r for role in section.values() for r in role["runs"]}
    elif group == "vendi_per_n":
        runs |= {r for r in (section["corpus"], section["no_corpus"]) if r}
    elif section.get("run"):
        runs.add(section["run"])
    return sorted(runs)


def group_step_rules(mapping: dict, group: str) -> set:
    """The step rules the group uses for its runs (rules/paper_numbers.smk declares selected_checkpoint.json)."""
    section = mapping["numbers"].get(group) or {}
    if "backbones" in section:
        return {role["step"] for entry in section["backbones"].values() for role in entry["roles"].values()}
    if group == "designer_reward":
        return {role["step"] for role in section.values()}
    return set()


# which run files each group reads: the patterns of the table whose machinery it reuses
GROUP_TABLE = {"games_gain": "table1", "tool_use_gain": "table2", "designer_reward": "table6",
               "learnable_share": "table7", "vendi_per_n": "table8", "formula_reveal": "table8",
               "reward_levels": "table8", "valid_env_rate": "table8"}
GROUP_REPORTED = {"games_gain": "table1_games.csv", "tool_use_gain": "table2_tool_use.csv",
                  "designer_reward": "table6_ablations_full.csv", "learnable_share": "table7_env_quality.csv",
                  "vendi_per_n": "table8_diversity.csv", "formula_reveal": QUOTED_CSV, "reward_levels": QUOTED_CSV,
                  "valid_env_rate": QUOTED_CSV}
EVAL_GROUPS = ("games_gain", "tool_use_gain", "designer_reward")


def run_fingerprint(runs_root: str | Path, runs: Sequence[str], group: str) -> str:
    """:func:`spade.paper.table_runs.run_fingerprint` over the files this group reads (a Snakemake parameter)."""
    return table_runs.run_fingerprint(runs_root, runs, GROUP_TABLE[group])


# ----- macro names and formatting -------------------------------------------------------------------------------
_ONES = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten", "Eleven", "Twelve",
         "Thirteen", "Fourteen", "Fifteen", "Sixteen", "Seventeen", "Eighteen", "Nineteen")
_TENS = ("", "", "Twenty", "Thirty", "Forty", "Fifty", "Sixty", "Seventy", "Eighty", "Ninety")


def _number_word(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + (_ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _ONES[n // 100] + "Hundred" + (_number_word(n % 100) if n % 100 else "")
    raise ValueError(f"{n} is too large for a macro name")


def macro_word(text: str) -> str:
    """A macro-name part (letters only) of a label: digit runs become English words, ``.``/``-``/``_``/blanks
    separate capitalised words: ``30B`` -> ``ThirtyB``, ``early`` -> ``Early``."""
    parts = re.findall(r"\d+|[A-Za-z]+", text)
    if not parts or "".join(parts) != re.sub(r"[\s._-]", "", text):
        raise ReportInputError(f"label {text!r} cannot become part of a LaTeX macro name (letters and digits only)")
    return "".join(_number_word(int(p)) if p.isdigit() else p[:1].upper() + p[1:] for p in parts)


def format_value(value: float, decimals: int, signed: bool = False) -> str:
    """LaTeX text of a number: ``decimals`` places, a typeset minus sign, ``+`` before gains when ``signed``."""
    text = f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"
    if float(text) == 0:
        text = text.replace("-", "+" if signed else "")
    return "$-$" + text[1:] if text.startswith("-") else text


@dataclass
class Number:
    """One quoted number: ours (``value``, or None with a ``mark`` and the ``reason``) and the paper's."""

    macro: str  # without the backslash, letters only
    what: str  # what is measured, in words
    value: float | None
    decimals: int
    reported: float | None
    reported_source: str
    signed: bool = False
    scale: float = 1.0  # shown = value * scale (fractions shown as percent)
    unit: str = ""  # LaTeX after a shown number (not after a mark), e.g. r"\,\%"
    mark: str = ""
    reason: str = ""
    detail: dict = field(default_factory=dict)
    off: list = field(default_factory=list)  # spade.paper.scale.RunScale of the runs behind it not at the paper's scale

    def shown(self) -> str:
        if self.value is None:
            return r"\textit{" + (self.mark or NOT_RUN) + "}"
        toy = r"\textsuperscript{toy}" if self.off else ""
        return format_value(self.value * self.scale, self.decimals, self.signed) + self.unit + toy

    def shown_reported(self) -> str:
        if self.reported is None:
            return REPORTED_NONE
        return format_value(self.reported, self.decimals, self.signed) + self.unit


@dataclass
class NumberContext:
    """What a group's computation needs and collects: the mapping, folders, files read and runs used."""

    mapping: dict
    runs_root: Path
    reported_dir: Path
    inputs: list = field(default_factory=list)
    runs: set = field(default_factory=set)

    def run_dir(self, run: str | None) -> Path | None:
        if not run:
            return None
        folder = Path(self.runs_root) / run
        return folder if folder.is_dir() else None

    def absent(self, runs: Sequence[str]) -> str:
        """Why ``runs`` give no number when one of them is not there ('' when all folders exist)."""
        if not runs:
            return "no run mapped"
        gone = [r for r in runs if self.run_dir(r) is None]
        return f"run {', '.join(gone)} not run (no folder under {shown_path(self.runs_root)})" if gone else ""


def _missing(number: Number, mark: str, reason: str) -> Number:
    number.value, number.mark, number.reason = None, mark, reason
    return number


# ----- reported values -----------------------------------------------------------------------------------------
def reported_cell(reported_dir: Path, stem: str, key: dict, column: str) -> tuple[float | None, str]:
    """The number in the reported CSV ``stem`` at the row matching ``key`` (column -> text) and ``column``."""
    path = Path(reported_dir) / stem
    rows = read_reported(path, [*key, column])
    for line, row in enumerate(rows, start=2):
        if all(row[k] == v for k, v in key.items()):
            return reported_number(path, line, column, row[column]), f"{stem}, line {line}, column {column}"
    shown = ", ".join(f"{k}={v}" for k, v in key.items())
    raise ReportInputError(f"{path}: no row with {shown} (check the run mapping's 'reported' names)")


def quoted_value(reported_dir: Path, key: str) -> tuple[float | None, str]:
    """A number of ``quoted_numbers.csv`` (columns key, value, unit, where)."""
    return reported_cell(reported_dir, QUOTED_CSV, {"key": key}, "value")


def reported_column_of_phase(reported_dir: Path, stem: str, phase: str) -> str | None:
    """The reported column of a phase: the column of ``stem`` whose name starts with ``<phase>_``."""
    columns = read_reported(Path(reported_dir) / stem, [])
    names = list(columns[0]) if columns else []
    found = [c for c in names if c.startswith(f"{phase}_")]
    return found[0] if len(found) == 1 else None


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


# ----- benchmark averages (Tables 1, 2, 6) -----------------------------------------------------------------
def load_eval_results(ctx: NumberContext, runs: Sequence[str]) -> ResultIndex:
    """Evaluation results of ``runs`` (tidy) as a :class:`spade.paper.table_runs.ResultIndex`; files recorded."""
    tidy, files = load_results(runs_root=ctx.runs_root, runs=[r for r in runs if r])
    ctx.inputs += files
    for run in runs:
        selected = Path(ctx.runs_root) / run / "selected_checkpoint.json"
        if selected.is_file():
            ctx.inputs.append(selected)
    return ResultIndex(tidy)


def benchmark_average(ctx: NumberContext, spec: BenchmarkTable, role: dict, results: ResultIndex,
                      number: Number, backbone: str = PAPER_30B) -> Number:
    """``number`` filled with the table's "avg" of the runs of ``role`` at the step its rule picks (the Table 1,
    2 or 6 cell, via :func:`spade.paper.benchmark_tables.ours_row`), marked when a run is not at ``backbone``'s
    scale."""
    ctx.runs.update(role["runs"])
    number.off = off_scale(ctx.runs_root, [r for r in role["runs"] if ctx.run_dir(r)], backbone,
                           model_only=role["step"] == "base")  # a base-model number: only the model must match
    row = ours_row(spec, {"runs": role["runs"], "step": role["step"]}, results, ctx.runs_root, COLUMN_METRICS)
    number.detail = {"runs": role["runs"], "step_rule": role["step"],
                     "steps": [c.step for c in row["choices"]], "table": spec.name, "backbone": backbone}
    value = row["values"]["avg"]
    if value is None:
        gone = ctx.absent(role["runs"])
        return _missing(number, NOT_RUN if gone else NO_DATA, gone or "; ".join(row["missing"]) or "no average")
    number.value = value
    number.detail["cells"] = {k: v for k, v in row["cells"].items()}
    return number


def _derived(number: Number, value: float | None, parts: Sequence[Number]) -> Number:
    """``number`` = ``value`` computed from ``parts``; when a part is missing, the worst mark of the parts."""
    number.detail = {"from": [p.macro for p in parts]}
    number.off = list(dict.fromkeys(s for p in parts for s in p.off))
    if value is not None:
        number.value = value
        return number
    marks = [p.mark for p in parts if p.value is None]
    reasons = [f"{p.macro}: {p.reason}" for p in parts if p.value is None]
    return _missing(number, NOT_RUN if NOT_RUN in marks else NO_DATA, "; ".join(reasons))


def games_gain(ctx: NumberContext) -> list[Number]:
    """Per backbone: Table 1 averages of base, SPADE, Fixed-env GRPO, Fixed-env RLVE; SPADE - base; SPADE -
    each baseline (points)."""
    section = number_section(ctx.mapping, "games_gain")
    stem = GROUP_REPORTED["games_gain"]
    runs = sorted({r for e in section["backbones"].values() for role in e["roles"].values() for r in role["runs"]})
    results = load_eval_results(ctx, runs)
    names = {"base": ("Base", "base"), "spade": ("Spade", "spade_games"),
             "fixed_env_grpo": ("Grpo", "fixed_env_grpo"), "fixed_env_rlve": ("Rlve", "fixed_env_rlve")}
    out = []
    for size, entry in section["backbones"].items():
        word, backbone = entry["word"], entry["reported"]
        avg = {}
        for role, (name, method) in names.items():
            reported, source = reported_cell(ctx.reported_dir, stem, {"backbone": backbone, "method": method}, "avg")
            number = Number(f"NumGamesAvg{name}{word}", f"8-benchmark average (percent), {method}, {size}", None, 1,
                            reported, source)
            avg[role] = benchmark_average(ctx, TABLE1, entry["roles"][role], results, number, backbone)
            out.append(avg[role])
        reported, source = reported_cell(ctx.reported_dir, stem, {"backbone": backbone, "method": "spade_games"},
                                         "delta_vs_base")
        gain = Number(f"NumGamesGainSpade{word}", f"SPADE average minus base average (points), {size}", None, 1,
                      reported, source, signed=True)
        out.append(_derived(gain, _difference(avg["spade"].value, avg["base"].value), [avg["spade"], avg["base"]]))
        for role, name in (("fixed_env_grpo", "Grpo"), ("fixed_env_rlve", "Rlve")):
            margin = Number(f"NumGamesMargin{name}{word}", f"SPADE average minus {role} average (points), {size}",
                            None, 1, _difference(avg["spade"].reported, avg[role].reported),
                            f"{stem}: avg of spade_games minus avg of {role} ({backbone})", signed=True)
            out.append(_derived(margin, _difference(avg["spade"].value, avg[role].value), [avg["spade"], avg[role]]))
    return out


def tool_use_gain(ctx: NumberContext) -> list[Number]:
    """Per backbone: Table 2 averages of base and SPADE (tool use) and the gain (points)."""
    section = number_section(ctx.mapping, "tool_use_gain")
    stem = GROUP_REPORTED["tool_use_gain"]
    runs = sorted({r for e in section["backbones"].values() for role in e["roles"].values() for r in role["runs"]})
    results = load_eval_results(ctx, runs)
    out = []
    for size, entry in section["backbones"].items():
        word, backbone = entry["word"], entry["reported"]
        models = {"base": f"{backbone} (base)", "spade": f"{backbone} + SPADE (tool use)"}
        avg = {}
        for role, name in (("base", "Base"), ("spade", "Spade")):
            reported, source = reported_cell(ctx.reported_dir, stem, {"section": "ours", "model": models[role]}, "avg")
            number = Number(f"NumToolAvg{name}{word}", f"Table 2 average (percent), {models[role]}", None, 1,
                            reported, source)
            avg[role] = benchmark_average(ctx, TABLE2, entry["roles"][role], results, number, backbone)
            out.append(avg[role])
        reported, source = reported_cell(ctx.reported_dir, stem, {"section": "ours", "model": models["spade"]},
                                         "delta_vs_base")
        gain = Number(f"NumToolGainSpade{word}", f"SPADE (tool use) average minus base average (points), {size}",
                      None, 1, reported, source, signed=True)
        out.append(_derived(gain, _difference(avg["spade"].value, avg["base"].value), [avg["spade"], avg["base"]]))
    return out


def designer_reward(ctx: NumberContext) -> list[Number]:
    """Table 6 averages with the hint-regret designer reward and with EMA learning potential; their difference."""
    section = number_section(ctx.mapping, "designer_reward")
    stem = GROUP_REPORTED["designer_reward"]
    results = load_eval_results(ctx, sorted({r for role in section.values() for r in role["runs"]}))
    settings = {"hint_regret": ("Regret", "spade"), "learning_potential": ("LearningPotential",
                                                                           "ED reward = learning potential")}
    avg = {}
    for role, (name, setting) in settings.items():
        reported, source = reported_cell(ctx.reported_dir, stem, {"setting": setting}, "avg")
        number = Number(f"NumDesignerAvg{name}", f"8-benchmark average (percent), designer reward {role}", None, 1,
                        reported, source)
        avg[role] = benchmark_average(ctx, TABLE6, section[role], results, number)
    margin = Number("NumDesignerRegretMargin", "hint-regret average minus EMA-learning-potential average (points)",
                    None, 1, _difference(avg["hint_regret"].reported, avg["learning_potential"].reported),
                    f"{stem}: avg of spade minus avg of ED reward = learning potential", signed=True)
    parts = [avg["hint_regret"], avg["learning_potential"]]
    return parts + [_derived(margin, _difference(parts[0].value, parts[1].value), parts)]


# ----- environment archives (Tables 7, 8; figures 8, 16) ---------------------------------------------------
def _run_or_missing(ctx: NumberContext, run: str | None, numbers: list[Number]) -> Path | None:
    """The run folder, or None after marking every number "not run"."""
    if run:
        ctx.runs.add(run)
    folder = ctx.run_dir(run)
    if folder is None:
        for number in numbers:
            _missing(number, NOT_RUN, ctx.absent([run] if run else []))
    else:  # the archive numbers quote the paper's 30B games run
        for number in numbers:
            number.off = off_scale(ctx.runs_root, [run], PAPER_30B)
    return folder


def _sets_in(sets: list, first: int, last: int) -> list:
    return [(p, s) for p, s in sets if first <= s["_step"] <= last]


def learnable_share(ctx: NumberContext) -> list[Number]:
    """Per phase: learnable slots / all slots of the sets regenerated in the phase (Table 7's first row)."""
    section = number_section(ctx.mapping, "learnable_share")
    stem = GROUP_REPORTED["learnable_share"]
    signal = next(s for s, (m, _) in TABLE7_SIGNALS.items() if m == "learnable_share")
    numbers = []
    for phase in section["phases"]:
        column = reported_column_of_phase(ctx.reported_dir, stem, phase)
        reported, source = (reported_cell(ctx.reported_dir, stem, {"signal": signal}, column) if column
                            else (None, f"{stem} has no column for phase {phase}"))
        first, last = section["phases"][phase]
        numbers.append(Number(f"NumLearnableShare{macro_word(phase)}", f"learnable share, {phase} (steps {first}-"
                              f"{last})", None, 2, reported, source))
    folder = _run_or_missing(ctx, section["run"], numbers)
    if folder is None:
        return numbers
    measures, files, _ = env_quality(folder, section["phases"])
    ctx.inputs += files
    for number, phase in zip(numbers, section["phases"]):
        entry = measures["learnable_share"][phase]
        number.detail = {"run": section["run"], "steps": section["phases"][phase], "learnable": entry["learnable"],
                         "slots": entry["n"], "inputs": entry["inputs"]}
        if entry["value"] is None:
            first, last = section["phases"][phase]
            _missing(number, NO_DATA, f"run {section['run']} regenerated no environment set in steps {first}-{last}")
        else:
            number.value = entry["value"]
    return numbers


def vendi_per_n(ctx: NumberContext, embedders: dict | None = None) -> list[Number]:
    """SBERT Vendi/n (Table 8) with and without corpus grounding, and the environments counted."""
    section = number_section(ctx.mapping, "vendi_per_n")
    stem = GROUP_REPORTED["vendi_per_n"]
    vendi = section["vendi"]
    labels = {"corpus": ("Corpus", "spade (full)"), "no_corpus": ("NoCorpus", "w/o corpus grounding")}
    out = []
    for role, (name, label) in labels.items():
        reported, source = reported_cell(ctx.reported_dir, stem, {"run": label}, "vendi_per_n")
        value = Number(f"NumVendiPerN{name}", f"SBERT Vendi/n, {label}", None, 2, reported, source)
        reported, source = reported_cell(ctx.reported_dir, stem, {"run": label}, "sample")
        sample = Number(f"NumVendiEnvs{name}", f"valid designer-written environments, {label}", None, 0, reported,
                        source)
        out += [value, sample]
        run = section[role]
        folder = _run_or_missing(ctx, run, [value, sample])
        if folder is None:
            continue
        if embedders is None:
            embedders = default_embedders(vendi["seed"])
        ours, files = diversity(folder, section["field"], vendi, 0.2, embedders)
        ctx.inputs += files
        detail = {"run": run, "field": section["field"], "vendi": vendi, "draw_sd": ours["draws"]}
        value.detail = sample.detail = detail
        sample.value = float(ours["sample"])
        if ours["vendi_per_n"] is None:
            _missing(value, NO_DATA, f"run {run} has {ours['sample']} valid designer-written environments; Vendi/n "
                     f"needs {vendi['size']}")
        else:
            value.value = ours["vendi_per_n"]
    return out


def is_physics_environment(env: dict, min_terms: int) -> bool:
    """The archive row's ``domain`` when it has one (physics iff it names physics), else the keyword label of
    the environment's code (:func:`spade.analysis.is_physics_text`)."""
    from spade.analysis import is_physics_text

    domain = env.get("domain")
    if isinstance(domain, str) and domain.strip():
        return "physics" in domain.lower()
    return is_physics_text(env.get("code") or "", min_terms)


def formula_reveal(ctx: NumberContext) -> list[Number]:
    """Per phase: revealing physics environments / physics environments (percent), and the physics count."""
    from spade.analysis import (
        designer_written,
        first_observation_text,
        formula_reveal_rate,
    )

    section = number_section(ctx.mapping, "formula_reveal")
    rates, counts = [], []
    for phase, (first, last) in section["phases"].items():
        reported, source = quoted_value(ctx.reported_dir, f"formula_reveal_{phase}")
        rates.append(Number(f"NumFormulaReveal{macro_word(phase)}", f"formula-reveal rate of physics environments "
                            f"(percent), {phase} (steps {first}-{last})", None, 0, reported, source, scale=PERCENT,
                            unit=PCT))
        counts.append(Number(f"NumFormulaPhysicsEnvs{macro_word(phase)}", f"physics environments, {phase}", None, 0,
                             None, "the paper gives no count"))
    folder = _run_or_missing(ctx, section["run"], rates + counts)
    if folder is None:
        return rates + counts
    sets = env_sets_with_paths(folder)
    ctx.inputs += [p for p, _ in sets]
    for rate, count, (phase, (first, last)) in zip(rates, counts, section["phases"].items()):
        observations, physics, skipped = [], [], []
        for path, env_set in _sets_in(sets, first, last):
            for env in env_set["environments"]:
                if not designer_written(env) or not isinstance(env.get("code"), str):
                    continue
                try:
                    text = first_observation_text(env["code"], env.get("class_name"))
                except (ValueError, SyntaxError) as exc:
                    skipped.append(f"{path.name} {env.get('env_id')}: {exc}")
                    continue
                observations.append(text)
                physics.append(is_physics_environment(env, section["physics_min_terms"]))
        estimate = formula_reveal_rate(observations, physics)
        rate.detail = count.detail = {"run": section["run"], "steps": [first, last], "environments": len(observations),
                                      "physics": sum(physics), "not_analysed": skipped}
        count.value = float(sum(physics))
        if estimate is None:
            _missing(rate, NO_DATA, f"run {section['run']} has no valid designer-written physics environment in "
                     f"steps {first}-{last} ({len(observations)} designer-written environments analysed)")
        else:
            rate.value = estimate.rate
            rate.detail.update(revealing=estimate.successes, wilson=[estimate.low, estimate.high])
    return rates + counts


def reward_levels(ctx: NumberContext) -> list[Number]:
    """Early vs late: mean distinct reward levels per environment and mean strictly partial levels (figure 16)."""
    from spade.analysis import phase_mean, read_env_sets, reward_level_rows

    section = number_section(ctx.mapping, "reward_levels")
    numbers = {}
    for key, name, what in (("levels", "RewardLevels", "distinct reward levels per environment"),
                            ("partial_levels", "PartialLevels", "strictly partial (0 < r < 1) reward levels")):
        for phase in ("early", "late"):
            first, last = section["phases"][phase]
            reported, source = quoted_value(ctx.reported_dir, f"{key}_{phase}")
            numbers[key, phase] = Number(f"Num{name}{macro_word(phase)}", f"mean {what}, {phase} (steps {first}-"
                                         f"{last})", None, 1, reported, source)
    folder = _run_or_missing(ctx, section["run"], list(numbers.values()))
    if folder is None:
        return list(numbers.values())
    ctx.inputs += [p for p, _ in env_sets_with_paths(folder)]
    try:
        rows = reward_level_rows(read_env_sets(folder))
    except ValueError as exc:
        raise ReportInputError(f"environment archives of {folder}: {exc}") from None
    steps = [r["step"] for r in rows]
    for (key, phase), number in numbers.items():
        first, last = section["phases"][phase]
        value = phase_mean(steps, [r[key] for r in rows], first, last)
        count = sum(first <= s <= last for s in steps)
        number.detail = {"run": section["run"], "steps": [first, last], "environments": count}
        if value is None:
            _missing(number, NO_DATA, f"run {section['run']} has no valid, played environment in steps {first}-{last}")
        else:
            number.value = value
    return list(numbers.values())


# ----- valid-environment rate and executability ---------------------------------------------------------------
NOT_COMPILED = ("syntax_error", "empty", "too_large")  # intake reasons after which no compiling code exists
_FENCE_NOTE = re.compile(r"^removed \d+ stray fence line\(s\)$")
_BOXED_NOTE = "is not defined in the module)"  # escapes of \boxed{NAME} made to code that already compiles


def is_fence_repair(note: str) -> bool:
    return bool(_FENCE_NOTE.match(note))


def is_brace_repair(note: str) -> bool:
    """An intake change that made an f-string compile (spade.envs.intake.repair_fstring_braces)."""
    return note.startswith("escaped ") and " in f-string on line " in note and not note.endswith(_BOXED_NOTE)


def attempt_executability(reports: Sequence[dict]) -> dict:
    """Executability of raw designer output, one validation report per design attempt.

    Each attempt falls in one class:

    * ``raw``: its code compiled (the report's reason is not one of :data:`NOT_COMPILED`) with neither a
      stray-fence removal nor an f-string brace repair among the intake changes (extracting the fenced block,
      dropping ``<think>`` text, line ends or indentation are not repairs);
    * ``fence``: compiled after a stray-fence removal ("removed N stray fence line(s)") and no brace repair;
    * ``brace``: compiled with an f-string brace repair ("escaped ... in f-string on line ...", not the escapes
      of undefined ``\\boxed{NAME}`` fields, which are made to code that already compiles);
    * ``failed``: did not compile (syntax_error, empty, too_large).

    Returns the counts, ``attempts`` and the shares ``raw_share`` = raw / attempts, ``after_fence_share`` =
    (raw + fence) / attempts, ``brace_share`` = brace / attempts (the further share the brace repair fixes) and
    ``compiled_share`` = (raw + fence + brace) / attempts (None without attempts).
    """
    counts = {"raw": 0, "fence": 0, "brace": 0, "failed": 0}
    for i, report in enumerate(reports):
        if not isinstance(report, dict) or not isinstance(report.get("reason"), str):
            raise ReportInputError(f"validation report {i} has no 'reason' (is it a report of spade.envs.validate?)")
        changes = report.get("changes") or []
        if report["reason"] in NOT_COMPILED:
            counts["failed"] += 1
        elif any(is_brace_repair(c) for c in changes):
            counts["brace"] += 1
        elif any(is_fence_repair(c) for c in changes):
            counts["fence"] += 1
        else:
            counts["raw"] += 1
    n = len(reports)

    def share(k):
        return k / n if n else None

    return {**counts, "attempts": n, "raw_share": share(counts["raw"]),
            "after_fence_share": share(counts["raw"] + counts["fence"]), "brace_share": share(counts["brace"]),
            "compiled_share": share(n - counts["failed"])}


def valid_env_rate(ctx: NumberContext) -> list[Number]:
    """Valid-environment rate of the design attempts (Wilson interval) and the executability shares."""
    from spade.analysis import valid_env_rate_from_sets

    section = number_section(ctx.mapping, "valid_env_rate")
    conf = section["confidence"]
    pct = f"{conf * 100:g}%"
    none = "the paper gives no value"
    rate = Number("NumValidEnvRate", "valid-environment rate of design attempts (percent)", None, 1, None, none,
                  scale=PERCENT, unit=PCT)
    low = Number("NumValidEnvRateLow", f"lower end of its Wilson {pct} interval (percent)", None, 1, None, none,
                 scale=PERCENT, unit=PCT)
    high = Number("NumValidEnvRateHigh", f"upper end of its Wilson {pct} interval (percent)", None, 1, None, none,
                  scale=PERCENT, unit=PCT)
    attempts = Number("NumDesignAttempts", "design attempts (validation reports)", None, 0, None, none)
    shares = []
    for key, name, what, signed in (
            ("raw_share", "NumExecRaw", "compiled with no repair (percent of attempts)", False),
            ("after_fence_share", "NumExecAfterFence", "compiled after stray-fence removal (percent)", False),
            ("brace_share", "NumExecBraceFurther", ("further share compiled by f-string brace repair (percent of "
                                                    "attempts)"), True),
            ("compiled_share", "NumExecCompiled", "compiled after all intake repairs (percent)", False)):
        quoted = {"raw_share": "exec_raw", "after_fence_share": "exec_after_fence", "brace_share": "exec_brace_further"}
        reported, source = quoted_value(ctx.reported_dir, quoted[key]) if key in quoted else (None, none)
        shares.append((key, Number(name, what, None, 1, reported, source, signed=signed, scale=PERCENT,
                                          unit=PCT)))
    numbers = [rate, low, high, attempts] + [n for _, n in shares]
    folder = _run_or_missing(ctx, section["run"], numbers)
    if folder is None:
        return numbers
    sets = env_sets_with_paths(folder)
    ctx.inputs += [p for p, _ in sets]
    reports = [r for _, s in sets for env in s["environments"] for r in env.get("reports") or []]
    detail = {"run": section["run"], "sets": len(sets), "attempts": len(reports)}
    for number in numbers:
        number.detail = dict(detail)
    if not reports:
        for number in numbers:
            _missing(number, NO_DATA, f"run {section['run']} has no validation reports in envs/set_*.json")
        return numbers
    estimate = valid_env_rate_from_sets([s for _, s in sets], conf)
    rate.value, low.value, high.value = estimate.rate, estimate.low, estimate.high
    rate.detail.update(valid=estimate.successes, confidence=conf)
    attempts.value = float(len(reports))
    classes = attempt_executability(reports)
    for key, number in shares:
        number.value = classes[key]
        number.detail.update({k: classes[k] for k in ("raw", "fence", "brace", "failed")})
    return numbers


# ----- writing -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Group:
    name: str
    title: str
    compute: Callable
    definitions: tuple


GROUP_SPECS = {g.name: g for g in (
    Group("games_gain", "Games transfer: SPADE's gain over base and margins over the fixed-environment baselines",
          games_gain, (
              ("Avg: the unweighted mean of the 8 Table 1 columns (AIME25, AIME26, GPQA-D, LCB-v6, RG-Math, RG-Algo, "
               "RG-Cog, RG-Logic) in percent, at the checkpoint the role's step rule picks (as Table 1; base = step 0)."),
              ("Gain: SPADE Avg minus base Avg; Margin: SPADE Avg minus the baseline's Avg (points, from unrounded "
               "values). Reported margins are differences of the paper's rounded averages."))),
    Group("tool_use_gain", "Tool use: SPADE's Table 2 average gain over base", tool_use_gain, (
        ("Avg: mean of the BFCL v4 multi-turn, tau2 and ACEBench-Agent averages (Table 2), percent; Gain: SPADE minus "
         "base (points)."),)),
    Group("designer_reward", "Designer reward: hint regret vs EMA learning potential at 30B", designer_reward, (
        ("Avg: 8-benchmark average of Table 6 (percent) at the role's checkpoint; Margin: regret minus learning "
         "potential (points)."),)),
    Group("learnable_share", "Learnable share of the environment sets per training phase", learnable_share, (
        ("Learnable share: slots whose RA win rate lies in [0.2, 0.8] / all slots of the environment sets "
         "regenerated in the phase (empty slots count 0); Table 7's first row, the 16-step windows of figure 6 "
         "pooled."),)),
    Group("vendi_per_n", "Diversity: SBERT Vendi/n with and without corpus grounding", vendi_per_n, (
        ("Vendi/n: Vendi score (cosine kernel, SBERT all-MiniLM-L6-v2 embeddings of the code) / draw size, mean "
         "over balanced draws of valid designer-written environments (Table 8). Envs: environments counted."),)),
    Group("formula_reveal", "Formula reveal in the first observation of physics environments", formula_reveal, (
        ("Rate: physics environments whose first observation (static stand-in: string literals reached from "
         "reset) prints a formula / physics environments (percent), over valid designer-written environments of the "
         "sets regenerated in the phase; physics = the row's domain label, else at least physics_min_terms physics "
         "terms in the code (spade.analysis.is_physics_text)."),)),
    Group("reward_levels", "Reward levels per environment early and late in training", reward_levels, (
        ("Levels: distinct final rewards an environment paid (6 decimals); partial: those strictly between 0 and "
         "1; mean over the valid, played environments of the sets regenerated in the phase (figure 16's rows)."),)),
    Group("valid_env_rate", "Valid-environment rate and executability of raw designer output", valid_env_rate, (
        "Valid rate: validation reports with valid true / all reports (one per design attempt), Wilson interval.",
        ("Raw: attempts whose code compiled with neither a stray-fence removal nor an f-string brace repair; "
         "after fence: raw plus those compiled after removing stray fence lines (and no brace repair); brace "
         "further: compiled with an f-string brace repair; compiled: all that compiled. Not compiled: reasons "
         "syntax_error, empty, too_large. Every share is of all design attempts."))),
)}


def _ascii(text: str) -> str:
    return text.encode("ascii", "replace").decode("ascii")


def render_macros(group: Group, numbers: Sequence[Number], script: str, mapping_path: str,
                  runs: dict[str, str]) -> str:
    """The macro file: a comment block (writer, rule, runs, definitions), then ``\\newcommand`` per macro."""
    seen = set()
    for number in numbers:
        if not re.fullmatch(r"[A-Za-z]+", number.macro) or number.macro in seen:
            raise ReportInputError(f"bad or repeated macro name {number.macro!r} in group {group.name}")
        seen.add(number.macro)
    run_text = "; ".join(f"{run} ({state})" for run, state in sorted(runs.items())) or "none mapped"
    lines = [f"% Quoted numbers '{group.name}': {group.title}.",
             (f"% Written by {script} (Snakemake rule paper_number_{group.name}) through spade.paper.numbers; do "
              "not edit."), f"% Run mapping: {mapping_path}. Runs: {run_text}.", "% Definitions:"]
    lines += [f"%   {_ascii(d)}" for d in group.definitions]
    lines += ["% \\<Name> is our value (\\textit{not run}: no run; \\textit{no data}: the run lacks the data);",
              (f"% \\<Name>Reported is the paper's value ({REPORTED_NONE} where the paper gives none). Sidecar: "
               "<this file>.provenance.json."), ""]
    off = list(dict.fromkeys(s for n in numbers if n.value is not None for s in n.off))
    backbones = [n.detail.get("backbone", PAPER_30B) for n in numbers if n.value is not None and n.off]
    text = latex_escape(banner(off, backbones))
    lines.append(f"% \\{scale_macro(group)}: the toy-scale banner of the paragraph quoting these numbers "
                 "(empty when every value of ours comes from a run at the paper's scale; toy values also carry "
                 "a superscript 'toy').")
    lines.append(f"\\newcommand{{\\{scale_macro(group)}}}{{" + (
        r"\par\noindent\fbox{\parbox{\dimexpr\linewidth-2\fboxsep-2\fboxrule}{\textbf{" + text + r"}}}\par "
        if text else "") + "}  % toy-scale banner")
    for number in numbers:
        note = f"ours: {number.what}" + (f" [{number.mark}: {number.reason}]" if number.value is None else "")
        lines.append(f"\\newcommand{{\\{number.macro}}}{{{number.shown()}}}  % {_ascii(note)}")
        lines.append(f"\\newcommand{{\\{number.macro}Reported}}{{{number.shown_reported()}}}  % reported: "
                     f"{_ascii(number.reported_source)}")
    return "\n".join(lines) + "\n"


def scale_macro(group: Group) -> str:
    """``Num<Group>Scale``, e.g. NumGamesGainScale: the group's toy-scale banner macro."""
    return "Num" + "".join(part.capitalize() for part in group.name.split("_")) + "Scale"


def _plain(value):
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else value


def write_numbers(group: Group, numbers: Sequence[Number], ctx: NumberContext, out: Path, script: str,
                  mapping_path: Path) -> list[Path]:
    """Write the macro file ``out`` and its sidecar ``<out>.provenance.json``, each atomically."""
    out = Path(out)
    if out.suffix != ".tex":
        raise ReportInputError(f"--out must name the macro file (.tex), got {out}")
    states = {run: ("present" if ctx.run_dir(run) else "not run") for run in ctx.runs}
    # the macro file prints paths relative to the repository root (the sidecar keeps them whole)
    write_text_atomic(out, render_macros(group, numbers, shown_path(script), shown_path(mapping_path), states))
    records = [{"macro": n.macro, "what": n.what, "value": _plain(n.value), "shown": n.shown(),
                "toy_scale": [s.label() for s in n.off],
                "scale": n.scale, "reported": n.reported, "reported_shown": n.shown_reported(),
                "reported_source": n.reported_source, "detail": n.detail} for n in numbers]
    missing = [{"macro": n.macro, "mark": n.mark, "reason": n.reason} for n in numbers if n.value is None]
    runs = {run: run_provenance(ctx.run_dir(run)) for run in sorted(ctx.runs) if ctx.run_dir(run)}
    summaries = [ctx.run_dir(run) / "summary.json" for run in ctx.runs if ctx.run_dir(run)]
    inputs = [Path(p) for p in [*ctx.inputs, *summaries] if Path(p).is_file()]
    record = provenance_record(script, inputs, [out], group=group.name, mapping=str(mapping_path), runs=runs,
                               numbers=records, missing=missing)
    write_json_atomic(sidecar_path(out), record)
    return [out, sidecar_path(out)]


def build_group(group_name: str, mapping_path: str | Path, runs_root: str | Path, reported_dir: str | Path,
                **kwargs) -> tuple[Group, list[Number], NumberContext]:
    """Compute the numbers of one group (``kwargs`` go to its computation, e.g. ``embedders`` for Vendi/n)."""
    if group_name not in GROUP_SPECS:
        raise ReportInputError(f"unknown number group {group_name!r} (known: {', '.join(GROUPS)})")
    group = GROUP_SPECS[group_name]
    mapping = load_number_runs(mapping_path)
    ctx = NumberContext(mapping, Path(runs_root), Path(reported_dir))
    reported = Path(reported_dir) / GROUP_REPORTED[group_name]
    ctx.inputs += [Path(mapping_path), reported]
    numbers = group.compute(ctx, **kwargs)
    return group, numbers, ctx


def number_main(group_name: str, script: str, argv=None, **kwargs) -> None:
    """The command line of every ``paper/scripts/num_<group>.py``."""
    group = GROUP_SPECS[group_name]
    parser = argparse.ArgumentParser(description=f"Quoted numbers: {group.title}")
    parser.add_argument("--mapping", type=Path, required=True, help="run mapping (paper/number_runs.yaml)")
    parser.add_argument("--runs-root", type=Path, required=True, help="folder of the run folders (results/runs)")
    parser.add_argument("--reported-dir", type=Path, required=True, help="the paper's values (paper/reported)")
    parser.add_argument("--out", type=Path, required=True, help="macro file to write (.tex; sidecar beside)")
    args = parser.parse_args(argv)
    group, numbers, ctx = build_group(group_name, args.mapping, args.runs_root, args.reported_dir, **kwargs)
    outputs = write_numbers(group, numbers, ctx, args.out, script, args.mapping)
    for number in numbers:
        print(f"\\{number.macro} = {number.shown()} (reported {number.shown_reported()})"
              + (f"  [{number.reason}]" if number.value is None else ""))
    print(f"wrote {', '.join(map(str, outputs))}")

"""Table 5: hyperparameters as our recipe files set them, beside the paper's.

    python paper/scripts/table5_hyperparameters.py --games configs/recipes/games.yaml \
        --tool-use configs/recipes/tool_use.yaml --reported paper/reported/table5_hyperparameters.csv \
        --out results/paper/tables/table5_hyperparameters.md

The values are read from the recipe files ``configs/recipes/games.yaml`` and ``tool_use.yaml``, validated into
:class:`spade.config.SpadeConfig` (no model card or run layer), so changing a recipe value changes the table. Each
row (:data:`HYPERPARAMETERS`) says how the recipe's value is written and which of its numbers (and on/off setting)
are compared with the paper's text. Writes Markdown, LaTeX (.tex) and a provenance sidecar (spade.paper.tables).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spade.paper.report import ReportInputError, run_script
from spade.paper.tables import BLANK, Line, Table, read_reported, report_written, shown_path, write_table


@dataclass(frozen=True)
class Hyperparameter:
    """One row of Table 5: how the recipe value is written (``text``), the numbers compared with the paper's
    (``numbers``; the reported numbers are read from its text, outside parentheses when ``strip``), an on/off
    setting compared with the paper's yes/on/no/off (``flag``), and the config keys it reads."""

    key: str
    keys: tuple
    text: Callable
    numbers: Callable = lambda c: ()
    flag: Callable | None = None
    strip: bool = True
    comparable: bool = True


def _g(x) -> str:
    return f"{x:g}"


HYPERPARAMETERS = (
    Hyperparameter("learning_rate", ("train.learning_rate",), lambda c: f"{_g(c.train.learning_rate)} (constant)",
                   lambda c: (c.train.learning_rate,)),
    Hyperparameter("optimizer", ("train.adam_beta1", "train.adam_beta2", "train.weight_decay"),
                   lambda c: f"AdamW, betas ({_g(c.train.adam_beta1)}, {_g(c.train.adam_beta2)}), weight decay "
                             f"{_g(c.train.weight_decay)}",
                   lambda c: (c.train.adam_beta1, c.train.adam_beta2, c.train.weight_decay), strip=False),
    Hyperparameter("kl_coef", ("train.kl_coef",), lambda c: _g(c.train.kl_coef), lambda c: (c.train.kl_coef,)),
    Hyperparameter("clip_eps_low_high", ("train.eps_low", "train.eps_high"),
                   lambda c: f"{_g(c.train.eps_low)}/{_g(c.train.eps_high)}",
                   lambda c: (c.train.eps_low, c.train.eps_high)),
    Hyperparameter("truncated_importance_sampling", ("train.tis",), lambda c: "yes" if c.train.tis else "no",
                   flag=lambda c: c.train.tis),
    Hyperparameter("reward_normalization", (), lambda c: "not a config key (z-score per group, spade.core.advantages)",
                   comparable=False),
    Hyperparameter("rollout_batch_envs", ("selfplay.envs_per_skill", "selfplay.active_skills"),
                   lambda c: str(c.selfplay.envs_per_skill * c.selfplay.active_skills),
                   lambda c: (c.selfplay.envs_per_skill * c.selfplay.active_skills,)),
    Hyperparameter("global_batch", ("train.global_batch",), lambda c: str(c.train.global_batch),
                   lambda c: (c.train.global_batch,)),
    Hyperparameter("group_size", ("selfplay.group_size",), lambda c: str(c.selfplay.group_size),
                   lambda c: (c.selfplay.group_size,)),
    Hyperparameter("total_rollouts", ("selfplay.total_steps",), lambda c: str(c.selfplay.total_steps),
                   lambda c: (c.selfplay.total_steps,)),
    Hyperparameter("envs_per_rollout", ("selfplay.envs_per_skill", "selfplay.active_skills", "selfplay.skills"),
                   lambda c: f"{c.selfplay.envs_per_skill * c.selfplay.active_skills} ({c.selfplay.envs_per_skill} x "
                             f"{c.selfplay.active_skills} active skills of {len(c.selfplay.skills)})",
                   lambda c: (c.selfplay.envs_per_skill * c.selfplay.active_skills, c.selfplay.envs_per_skill,
                              c.selfplay.active_skills, len(c.selfplay.skills)), strip=False),
    Hyperparameter("regeneration_interval_k", ("selfplay.regen_interval",), lambda c: str(c.selfplay.regen_interval),
                   lambda c: (c.selfplay.regen_interval,)),
    Hyperparameter("ed_temperature", ("designer.temperature",), lambda c: _g(c.designer.temperature),
                   lambda c: (c.designer.temperature,)),
    Hyperparameter("ed_max_tokens", ("designer.max_new_tokens",), lambda c: str(c.designer.max_new_tokens),
                   lambda c: (c.designer.max_new_tokens,)),
    Hyperparameter("ra_temperature", ("agent.temperature",), lambda c: _g(c.agent.temperature),
                   lambda c: (c.agent.temperature,)),
    Hyperparameter("ra_max_tokens", ("agent.max_new_tokens",), lambda c: str(c.agent.max_new_tokens),
                   lambda c: (c.agent.max_new_tokens,)),
    Hyperparameter("max_turns", ("agent.max_turns",), lambda c: str(c.agent.max_turns), lambda c: (c.agent.max_turns,)),
    Hyperparameter("max_context", ("agent.max_context_tokens",), lambda c: str(c.agent.max_context_tokens),
                   lambda c: (c.agent.max_context_tokens,)),
    Hyperparameter("ed_reward_blend",
                   ("designer.reward", "reward.plateau_weight", "reward.band_low", "reward.band_high",
                    "reward.regret_weight"),
                   lambda c: (f"plateau {_g(c.reward.plateau_weight)} band [{_g(c.reward.band_low)}, "
                              f"{_g(c.reward.band_high)}] + floored regret {_g(c.reward.regret_weight)}"
                              if c.designer.reward == "regret" else f"{c.designer.reward} (not the regret blend)"),
                   lambda c: ((c.reward.plateau_weight, c.reward.band_low, c.reward.band_high, c.reward.regret_weight)
                              if c.designer.reward == "regret" else (math.nan,))),
    Hyperparameter("regret_scale", ("reward.regret_scale",), lambda c: _g(c.reward.regret_scale),
                   lambda c: (c.reward.regret_scale,)),
    Hyperparameter("plateau_ramp", ("reward.ramp",), lambda c: _g(c.reward.ramp), lambda c: (c.reward.ramp,)),
    Hyperparameter("ed_update_delay", ("selfplay.regen_interval",),
                   lambda c: f"{c.selfplay.regen_interval} rollouts (= k)", lambda c: (c.selfplay.regen_interval,)),
    Hyperparameter("corpus", ("corpus.enabled", "corpus.offline_max_docs"),
                   lambda c: f"{c.corpus.offline_max_docs} docs at most" if c.corpus.enabled else "off",
                   lambda c: (c.corpus.offline_max_docs if c.corpus.enabled else math.nan,)),
    Hyperparameter("env_memory", ("memory.enabled", "memory.cap"),
                   lambda c: f"{'on' if c.memory.enabled else 'off'} (cap {c.memory.cap})",
                   lambda c: (c.memory.cap,), flag=lambda c: c.memory.enabled, strip=False),
)
HYPERPARAMETER_KEYS = {h.key: h for h in HYPERPARAMETERS}

_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(k?)(?![\w.])")
_TOOL_USE = re.compile(r"tool use\s+(\d+(?:\.\d+)?)")
_FLAG_WORDS = {"yes": True, "on": True, "no": False, "off": False}


def _strip_parentheses(text: str) -> str:
    while True:
        stripped = re.sub(r"\([^()]*\)", "", text)
        if stripped == text:
            return text
        text = stripped


def text_numbers(text: str) -> list[float]:
    """The numbers written in a reported cell, in order ("15k" = 15000; digits inside words such as
    "Qwen3-8B" are not numbers)."""
    return [float(number) * (1000.0 if k else 1.0) for number, k in _NUMBER.findall(text)]


def compare_hyperparameter(spec: Hyperparameter, config, reported: str, tool_use: bool = False) -> str:
    """``same`` when the recipe's numbers (and on/off setting) are the paper's, ``differs`` otherwise, ``n/a``
    where the value is not a config key. For the tool-use recipe a "tool use N" remark in the paper's text
    replaces its first number."""
    if not spec.comparable:
        return "n/a"
    if not reported:
        return BLANK
    expected = text_numbers(_strip_parentheses(reported) if spec.strip else reported)
    if tool_use and (remark := _TOOL_USE.search(reported)):
        expected = [float(remark.group(1))] + expected[1:]
    ours = spec.numbers(config)
    same = len(expected) >= len(ours) and all(
        math.isclose(float(a), b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(ours, expected))
    if spec.flag is not None:
        words = reported.strip().split()
        wanted = _FLAG_WORDS.get(words[0].strip(",;").lower()) if words else None
        same = same and wanted is not None and wanted == bool(spec.flag(config))
    return "same" if same else "differs"


def load_recipe(path: str | Path):
    """A recipe file validated as a run configuration (recipe layer only: no model card, no run file)."""
    from spade.config import ConfigError, load_config

    try:
        return load_config(path, layered=False)
    except ConfigError as exc:
        raise ReportInputError(f"recipe {path}: {exc}") from None


def build_table5(recipes: dict, reported_path: str | Path) -> tuple[Table, list[dict]]:
    """Table 5 from the recipes: ``recipes`` = {"games": path, "tool_use": path}."""
    configs = {name: load_recipe(path) for name, path in recipes.items()}
    rows = read_reported(reported_path, ("hyperparameter", "value"))
    seen, lines, cells = set(), [], []
    for line_no, row in enumerate(rows, start=2):
        key = row["hyperparameter"]
        spec = HYPERPARAMETER_KEYS.get(key)
        if spec is None:
            raise ReportInputError(f"{reported_path}, line {line_no}: hyperparameter {key!r} is not one we render "
                                   f"(known: {', '.join(HYPERPARAMETER_KEYS)})")
        seen.add(key)
        lines.append(_table5_line(spec, configs, recipes, row["value"], cells))
    for spec in HYPERPARAMETERS:  # rows the paper's table lacks still show our value
        if spec.key not in seen:
            lines.append(_table5_line(spec, configs, recipes, "", cells))
    notes = [
        ("Ours: the value in each recipe file, validated as a run configuration; a run file or the model card may "
        "override it for one run (the paper's per-model exceptions in parentheses live there)."),
        (f"Reported: the paper's Table 5 ({shown_path(reported_path)}), games; where it notes a tool-use value "
        "that value is compared with the tool-use recipe."),
        ("same / differs: the recipe's numbers (and on/off setting) against the numbers of the paper's text outside "
        "its parenthetical remarks; n/a: not a config key of ours."),
    ]
    headers = ["Ours: games recipe", "Ours: tool-use recipe", "Reported (paper)", "Games vs reported",
               "Tool use vs reported"]
    table = Table("Table 5: hyperparameters, as set in our recipes and as reported", "tab:hyperparameters",
                  ["Hyperparameter"], headers, [lines], notes, kind_header=None, value_align="l")
    return table, cells


def _table5_line(spec: Hyperparameter, configs: dict, recipes: dict, reported: str, cells: list) -> Line:
    games, tool_use = configs["games"], configs["tool_use"]
    values = [spec.text(games), spec.text(tool_use), reported or BLANK,
              compare_hyperparameter(spec, games, reported), compare_hyperparameter(spec, tool_use, reported, True)]
    cells.append({"row": spec.key, "config_keys": list(spec.keys), "reported": reported,
                  "games": {"recipe": str(recipes["games"]), "shown": values[0], "comparison": values[3]},
                  "tool_use": {"recipe": str(recipes["tool_use"]), "shown": values[1], "comparison": values[4]}})
    return Line([spec.key], "", values)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Table 5: hyperparameters from the recipes, beside the paper's")
    parser.add_argument("--games", type=Path, required=True, help="games recipe (configs/recipes/games.yaml)")
    parser.add_argument("--tool-use", type=Path, required=True, help="tool-use recipe (configs/recipes/tool_use.yaml)")
    parser.add_argument("--reported", type=Path, required=True, help="reported CSV (paper/reported/...)")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write (.tex and sidecar beside)")
    args = parser.parse_args(argv)
    recipes = {"games": args.games, "tool_use": args.tool_use}
    table, cells = build_table5(recipes, args.reported)
    outputs = write_table(table, args.out, "paper/scripts/table5_hyperparameters.py",
                          [args.games, args.tool_use, args.reported], cells, None,
                          recipes={k: str(v) for k, v in recipes.items()})
    report_written(outputs, table)


if __name__ == "__main__":
    sys.exit(run_script(main))

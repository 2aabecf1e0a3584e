"""The mechanism check (issue 39): does SPADE's own loop carry signal, and does the designer learn to aim at the agent?

A mechanism run is a SPADE run whose designer completes the ``copy_span`` template (``designer.response_template``):
its one token is the environment's difficulty NEED (spade.envs.checks.copy_span). Its control is the same run with
``selfplay.train_designer: false``. Everything here reads what the runs wrote: each closed set's archive
(``envs/set_*.json``: code, window statistics, regret, designer reward; ``read_sets``) and ``metrics.jsonl`` (the designer samples
each optimizer step trained on: ``designer_batch_sets``, ``designer_batch_nonzero``).

Per design round (one environment set, made at step s = round x k), ``design_rounds`` derives:

- the designed difficulty of each slot (the NEED its module ends with; None for an empty slot);
- the learnable share: slots whose window win rate lies in [LEARNABLE_LOW, LEARNABLE_HIGH], an empty slot counting 0;
- the designer reward: the mean over the round's valid designs (the recipe's 0.4 floored regret + 0.6 plateau);
- the agent's digit accuracy: the per-digit accuracy p that best explains the round's no-hint wins when a reply
  has each digit right with probability p (``digit_accuracy``). This measures the agent apart from how
  hard its environments were, which a win rate mixes in (and which the designer keeps near its band).

``integrity`` checks that the run's designer rewards are the recipe's, recomputed here independently of
spade.core.rewards (regret, Eq. 3; plateau and the blend, spec 4), and that the designer samples each step trained on
came from the set the delayed update should train (made k steps earlier; the last set at the run's last step).
``properties`` then tests what issue 39 asks of the trained designer against its control; both make up the check.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from spade.envs.checks.copy_span import SHOWN

LEARNABLE_LOW, LEARNABLE_HIGH = 0.2, 0.8  # a slot is learnable when its window win rate lies in this band
NONZERO_SHARE = 0.5  # property 1: designer samples with a nonzero advantage in at least this share of design rounds
ACCURACY_GAIN = 0.05  # property 4: the agent must gain this much digit accuracy (first -> last quarter) for a
# correlation with the designed difficulty to mean that the difficulty follows the agent (a fifth of chance, 0.25)
TOLERANCE = 1e-9  # recomputed rewards and regrets must agree to this
BOOTSTRAP = 2000  # resamples of each bootstrap interval


class MechanismInputError(ValueError):
    """A run folder lacks what the mechanism check reads."""


@dataclass(frozen=True)
class Round:
    """One design round of one run."""

    step: int  # the regeneration step that made the set
    needs: tuple  # [slots] designed difficulty, None for an empty slot or a value that is no number (`NEED = None`
    # loads, and compares whole replies)
    win_rates: tuple  # [slots] window win rate, None for an empty slot
    rewards: tuple  # [valid designs] designer reward
    plays: tuple = ()  # [(NEED, wins, no-hint plays)] of each played slot over the window

    @property
    def learnable(self) -> float:
        return sum(w is not None and LEARNABLE_LOW <= w <= LEARNABLE_HIGH for w in self.win_rates) / len(self.win_rates)

    @property
    def reward(self) -> float | None:
        return sum(self.rewards) / len(self.rewards) if self.rewards else None

    @property
    def mean_need(self) -> float | None:
        needs = [n for n in self.needs if n is not None]
        return sum(needs) / len(needs) if needs else None

    @cached_property  # a grid search, read by several properties and the figure's series
    def accuracy(self) -> float | None:
        return digit_accuracy(self.plays)


def _right(p: float, k: int, shown: int) -> float:
    """The chance of exactly k right digits of ``shown``, each right with probability p independently."""
    return math.comb(shown, k) * p ** k * (1.0 - p) ** (shown - k)


def win_chance(p: float, need: int, shown: int = SHOWN) -> float:
    """The chance that a reply copying each of ``shown`` digits right with probability p, independently, has at least
    ``need`` of them right: copy_span's win condition."""
    return sum(_right(p, k, shown) for k in range(max(need, 0), shown + 1))


def digit_accuracy(plays, grid: int = 1000) -> float | None:
    """The agent's per-digit accuracy p that best explains a round's wins: the maximum-likelihood p when a reply wins
    a NEED-n environment with probability ``win_chance(p, n)``, over the round's (NEED, wins, plays) whose NEED can be
    told apart from p (1 to SHOWN: a NEED of 0 is always won, one above SHOWN never); found on a grid of ``grid``
    points in (0, 1). None without such plays."""
    plays = [(need, wins, n) for need, wins, n in plays if n and 1 <= need <= SHOWN]
    if not plays:
        return None

    def log_likelihood(p):
        total = 0.0
        for need, wins, n in plays:  # a loss summed as its own terms (fewer than need right): 1 - win rounds to 0
            lose = sum(_right(p, k, SHOWN) for k in range(need))
            total += wins * math.log(win_chance(p, need)) + (n - wins) * math.log(lose)
        return total

    return max((i / grid for i in range(1, grid)), key=log_likelihood)


def slot_need(code: str, marker: str) -> int | None:
    """The difficulty a design wrote: the integer after the template's marker on the module's last line."""
    match = re.search(re.escape(marker) + r"\s*(\d+)\s*\Z", code or "")
    return int(match.group(1)) if match else None


def read_sets(run_dir: Path) -> list:
    """Every archived environment set of a run, in step order: [(step, [slot dict])] (spade.analysis.read_env_sets)."""
    from spade.analysis import read_env_sets

    try:
        archives = read_env_sets(run_dir)
    except ValueError as exc:
        raise MechanismInputError(str(exc)) from None
    if not archives:
        raise MechanismInputError(f"{run_dir}: no envs/set_*.json (is it a finished SPADE run?)")
    return [(archive["environments"][0]["step"], archive["environments"]) for archive in archives]


def design_rounds(sets: list, marker: str) -> list:
    """The design rounds (module docstring) of a run's sets (``read_sets``)."""
    rounds = []
    for step, slots in sets:
        needs, win_rates, rewards, plays = [], [], [], []
        for slot in slots:
            need = slot_need(slot["code"], marker) if slot["valid"] else None
            needs.append(need)
            episodes = slot["episodes"]
            win_rates.append(slot["wins"] / episodes if episodes else None)
            if slot["valid"] and slot["source"] == "designer" and slot["designer_reward"] is not None:
                rewards.append(slot["designer_reward"])
            if need is not None and episodes:
                plays.append((need, slot["wins"], episodes))
        rounds.append(Round(step, tuple(needs), tuple(win_rates), tuple(rewards), tuple(plays)))
    return rounds


# ----- integrity: the recipe's rewards and the delayed update, recomputed here ----------------------------------------
def recipe_regret(slot: dict) -> float | None:
    """Eq. 3 with paired arms: the mean over the seeds both arms played of (hinted return - no-hint return)."""
    hinted = dict(zip(slot["hint_seeds"], slot["hint_returns"]))
    pairs = [(hinted[seed], r) for seed, r in zip(slot["paired_seeds"], slot["paired_returns"]) if seed in hinted]
    return sum(h - r for h, r in pairs) / len(pairs) if pairs else None


def recipe_reward(regret_value: float | None, plateau_input: float, reward) -> float:
    """Spec 4: regret_weight x clip(max(0, r_D) / scale, 0, 1) + plateau_weight x plateau(input), the plateau 1 on
    [band_low, band_high] and falling linearly to 0 over ``ramp`` on each side (``reward``: the run's reward config)."""
    floored = min(1.0, max(0.0, regret_value or 0.0) / reward.regret_scale)
    distance = max(reward.band_low - plateau_input, plateau_input - reward.band_high, 0.0)
    return reward.regret_weight * floored + reward.plateau_weight * max(0.0, 1.0 - distance / reward.ramp)


def integrity(sets: list, metrics: list, config, trained: bool) -> list:
    """What breaks the recipe in a run: a list of failures (empty = none). ``sets``: its archived sets (``read_sets``);
    ``metrics``: its metrics.jsonl records; ``config``: its SpadeConfig; ``trained``: whether its designer trains (a
    control run trains no designer sample)."""
    failures = []
    k, last = config.selfplay.regen_interval, config.selfplay.total_steps - 1
    for step, slots in sets:
        for slot in slots:
            if not (slot["valid"] and slot["source"] == "designer") or slot["filled_step"] is not None:
                continue
            regret_value = recipe_regret(slot)
            if (regret_value is None) != (slot["regret"] is None) or \
                    regret_value is not None and abs(regret_value - slot["regret"]) > TOLERANCE:
                failures.append(f"set {step}, {slot['env_id']}: regret {slot['regret']!r}, but its hinted and paired "
                                f"no-hint returns give {regret_value!r} (Eq. 3)")
                continue
            episodes = slot["episodes"]
            value = (slot["return_sum"] if config.reward.plateau_input == "mean_return" else slot["wins"]) / episodes \
                if episodes else 0.0
            expected = recipe_reward(regret_value, min(1.0, max(0.0, value)), config.reward)
            if slot["designer_reward"] is None or abs(expected - slot["designer_reward"]) > TOLERANCE:
                failures.append(f"set {step}, {slot['env_id']}: designer reward {slot['designer_reward']!r}, but the "
                                f"recipe gives {expected!r} from its regret {regret_value!r} and plateau input {value!r}")
    if not trained:
        return failures
    # the sets that make designer samples: a valid design made at the set's step, or any attempt under the penalty
    made = [step for step, slots in sets if any(
        slot["valid"] and slot["source"] == "designer" and slot["filled_step"] is None or
        config.designer.invalid == "penalty" and slot["attempts"] for slot in slots)]
    for line in metrics:
        step = line["step"]
        closing = max((s for s, _ in sets if s <= step), default=None)  # the set the last step flushes
        expected = sorted(({step - k} if step % k == 0 and step - k in made else set()) |
                          ({closing} if step == last and closing in made else set()))
        got = line.get("designer_batch_sets", [])
        if got != expected:
            failures.append(f"step {step}: the designer samples trained came from the sets of steps {got}; the "
                            f"delayed update (k = {k}) trains those of {expected}")
    return failures


# ----- properties: the trained designer against its control ----------------------------------------------------------
def quarters(rounds: list) -> tuple[list, list]:
    """The first and the last quarter of a run's rounds (at least one each)."""
    size = max(1, len(rounds) // 4)
    return rounds[:size], rounds[-size:]


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def stratified_bootstrap(groups: list, seed: int = 0) -> tuple[float, float, float]:
    """Mean over groups of (mean of last - mean of first), with a 95% percentile interval that resamples the rounds
    of each quarter of each group (seed) with replacement. ``groups``: [(first values, last values)] per seed."""
    def statistic(pairs):
        return sum(sum(b) / len(b) - sum(a) / len(a) for a, b in pairs) / len(pairs)

    rng = random.Random(seed)
    estimate = statistic(groups)
    draws = sorted(statistic([([rng.choice(a) for _ in a], [rng.choice(b) for _ in b]) for a, b in groups])
                   for _ in range(BOOTSTRAP))
    return estimate, draws[int(0.025 * BOOTSTRAP)], draws[int(0.975 * BOOTSTRAP) - 1]


def spearman(xs: list, ys: list) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either side is constant."""
    from scipy.stats import spearmanr

    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return float(spearmanr(xs, ys).statistic)


def nonzero_rounds(metrics: list) -> tuple[int, int]:
    """(design rounds whose designer samples trained with a nonzero advantage, design rounds trained): read from the
    steps' ``designer_batch_sets`` / ``designer_batch_nonzero``."""
    trained, nonzero = set(), set()
    for line in metrics:
        sets = line.get("designer_batch_sets", [])
        trained.update(sets)
        if line.get("designer_batch_nonzero", 0):  # the last step may train two sets; its count is not split by set,
            nonzero.update(sets)                   # so a nonzero count there counts for both
    return len(nonzero), len(trained)


def properties(trained: dict, control: dict) -> tuple[list, bool]:
    """Issue 39's four properties. ``trained`` / ``control``: seed -> (rounds, metrics). Returns (rows of
    (property, seed or 'all', value, detail, holds), whether all hold)."""
    rows = []
    for seed, (rounds, metrics) in sorted(trained.items()):
        hit, total = nonzero_rounds(metrics)
        share = hit / total if total else 0.0
        rows.append(("1. designer samples with a nonzero advantage", seed, f"{share:.2f}",
                     f"{hit} of {total} trained design rounds (needs >= {NONZERO_SHARE})", share >= NONZERO_SHARE))
    groups = []
    for seed, (rounds, _) in sorted(trained.items()):
        first, last = quarters(rounds)
        a, b = [r.reward for r in first if r.reward is not None], [r.reward for r in last if r.reward is not None]
        if not a or not b:
            rows.append(("2. designer reward, last quarter - first quarter", seed, "n/a",
                         "a quarter without any valid design", False))
            continue
        diff, low, high = stratified_bootstrap([(a, b)], seed=seed)
        groups.append((a, b))
        rows.append(("2. designer reward, last quarter - first quarter", seed, f"{diff:+.3f}",
                     f"{_mean(a):.3f} -> {_mean(b):.3f}; 95% interval resampling this seed's rounds "
                     f"[{low:+.3f}, {high:+.3f}]", low > 0))
    if groups:
        diff, low, high = stratified_bootstrap(groups)
        rows.append(("2. designer reward, last quarter - first quarter", "all", f"{diff:+.3f}",
                     f"mean over {len(groups)} seeds; 95% interval resampling the rounds within each seed "
                     f"[{low:+.3f}, {high:+.3f}]", low > 0 and len(groups) == len(trained)))
    for seed, (rounds, _) in sorted(trained.items()):
        if seed not in control:
            rows.append(("3. learnable share, last quarter: trained vs control", seed, "n/a", "no control run", False))
            continue
        mine, theirs = _mean(r.learnable for r in quarters(rounds)[1]), \
            _mean(r.learnable for r in quarters(control[seed][0])[1])
        rows.append(("3. learnable share, last quarter: trained vs control", seed, f"{mine:.3f} vs {theirs:.3f}",
                     f"share of slots with a win rate in [{LEARNABLE_LOW}, {LEARNABLE_HIGH}], empty slots 0",
                     mine > theirs))
    for seed, (rounds, _) in sorted(trained.items()):
        pairs = [(r.accuracy, r.mean_need) for r in rounds if r.accuracy is not None and r.mean_need is not None]
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs]) if len(pairs) > 2 else None
        first, last = quarters(rounds)
        detail = (f"agent digit accuracy {_fmt(_mean(r.accuracy for r in first))} -> "
                  f"{_fmt(_mean(r.accuracy for r in last))}, designed NEED {_fmt(_mean(r.mean_need for r in first))}"
                  f" -> {_fmt(_mean(r.mean_need for r in last))} (first -> last quarter); Spearman over "
                  f"{len(pairs)} rounds")
        rose = (_mean(r.accuracy for r in last) or 0.0) - (_mean(r.accuracy for r in first) or 0.0)
        rows.append(("4. designed difficulty follows the agent's accuracy", seed,
                     "n/a" if rho is None else f"{rho:+.2f}", detail + f"; needs a positive correlation and an "
                     f"accuracy gain of at least {ACCURACY_GAIN} (this run: {rose:+.2f})",
                     rho is not None and rho > 0 and rose >= ACCURACY_GAIN))
    return rows, all(row[-1] for row in rows)


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"

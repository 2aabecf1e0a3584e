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
``properties`` then tests what issues 39 and 48 ask of the trained designer against its control, on its training
records, and ``heldout_rows`` on the held-out evaluation of the last checkpoints (benchmark
``mechanism_check_heldout``); all three make up the check.
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
TOLERANCE = 1e-9  # recomputed rewards and regrets must agree to this
BOOTSTRAP = 2000  # resamples of each bootstrap interval
HELDOUT_BENCHMARK = "mechanism_check_heldout"  # the benchmark (spade.evals.heldout) the check reads at the last checkpoints


class MechanismInputError(ValueError):
    """A run folder lacks what the mechanism check reads."""


@dataclass(frozen=True)
class Round:
    """One design round of one run."""

    step: int  # the regeneration step that made the set
    needs: tuple  # [slots] designed difficulty, None for an empty slot (copy_span refuses a NEED outside 1-4)
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


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def halves(rounds: list) -> tuple[list, list]:
    """The first and the second half of a run's rounds (at least one each; the middle round of an odd count goes to
    the second)."""
    size = max(1, len(rounds) // 2)
    return rounds[:size], rounds[size:] or rounds[-1:]


def bootstrap(statistic, samples: list, seed: int = 0) -> tuple[float, float, float]:
    """``statistic(samples)`` with a 95% percentile interval: each list of ``samples`` resampled with replacement on
    its own (a stratified bootstrap: rounds within a run's half, held-out items within a seed)."""
    rng = random.Random(seed)
    draws = sorted(statistic([[rng.choice(values) for _ in values] for values in samples]) for _ in range(BOOTSTRAP))
    return statistic(samples), draws[int(0.025 * BOOTSTRAP)], draws[int(0.975 * BOOTSTRAP) - 1]


PROPERTY_NAMES = ("(a) learnable share, second half: trained vs control",
                  "(b) designer reward, second half: trained vs control",
                  "(c) designed difficulty rises with the agent")


def _signed(value: float, digits: int = 3) -> str:
    """``value`` with its sign, rounded first (no '-0.000')."""
    return f"{round(value, digits) + 0.0:+.{digits}f}"


def _rise(lists) -> float:
    """mean(second) - mean(first) of [first, second]."""
    first, second = lists
    return sum(second) / len(second) - sum(first) / len(first)


def _gap(lists) -> float:
    """mean(mine) - mean(theirs) of [mine, theirs]."""
    return -_rise(lists)


def properties(trained: dict, control: dict) -> tuple[list, bool]:
    """Issue 48's properties of the trained designer against its control, and issue 39's first. ``trained`` /
    ``control``: seed -> (rounds, metrics). Returns (rows of (property, seed, value, detail, holds), whether all
    hold).

    1. designer samples with a nonzero advantage in at least NONZERO_SHARE of the design rounds (the loop trains its
       designer at all);
    (a) the learnable share of the second half of the rounds above the control's, with a 95% interval (resampling
        each run's rounds) that excludes 0: a designer whose difficulties ignore the agent (drawn uniformly) holds
        about the control's share;
    (b) the designer reward of the second half above the control's;
    (c) the designed difficulty rises with the agent: over the second half of the rounds (the first half is the
        designer's own learning, from the warm-up's spread over every NEED), the mean designed NEED of the last
        quarter minus that of the third (the rise) is above 0 with a 95% interval (resampling each quarter's rounds)
        that excludes 0, while the agent's digit accuracy rose between the same quarters. A designer that settles
        in the first half, or draws its NEED from a fixed distribution, has a rise near 0: its interval holds 0.
        The control's designs are never trained (they drift with the agent's training of the shared weights); their
        move is shown, not compared."""
    rows = []
    for seed, (rounds, metrics) in sorted(trained.items()):
        hit, total = nonzero_rounds(metrics)
        share = hit / total if total else 0.0
        rows.append(("1. designer samples with a nonzero advantage", seed, f"{share:.2f}",
                     f"{hit} of {total} trained design rounds (needs >= {NONZERO_SHARE})", share >= NONZERO_SHARE))
    for seed, (rounds, _) in sorted(trained.items()):
        if seed not in control:
            rows += [(name, seed, "n/a", "no control run", False) for name in PROPERTY_NAMES]
            continue
        theirs = control[seed][0]
        shares = [[r.learnable for r in halves(x)[1]] for x in (rounds, theirs)]
        diff, low, high = bootstrap(_gap, shares, seed=seed)
        rows.append((PROPERTY_NAMES[0], seed, f"{_mean(shares[0]):.3f} vs {_mean(shares[1]):.3f}",
                     f"share of slots with a win rate in [{LEARNABLE_LOW}, {LEARNABLE_HIGH}], empty slots 0; 95% "
                     f"interval of the difference resampling each run's rounds [{_signed(low)}, {_signed(high)}]",
                     low > 0))
        mine_reward, their_reward = (_mean(r.reward for r in halves(x)[1]) for x in (rounds, theirs))
        rows.append((PROPERTY_NAMES[1], seed, f"{_fmt(mine_reward)} vs {_fmt(their_reward)}", "mean over the half's "
                     "valid designs of the recipe's reward (the control's are computed, never trained on)",
                     mine_reward is not None and (their_reward is None or mine_reward > their_reward)))
        quarters = halves(halves(rounds)[1])  # the third and the last quarter of the rounds
        needs = [[r.mean_need for r in quarter if r.mean_need is not None] for quarter in quarters]
        control_needs = [[r.mean_need for r in quarter if r.mean_need is not None]
                         for quarter in halves(halves(theirs)[1])]
        accuracy = [_mean(r.accuracy for r in quarter) for quarter in quarters]
        if not all(needs) or None in accuracy:
            rows.append((PROPERTY_NAMES[2], seed, "n/a", "a quarter without a valid design or a played one", False))
            continue
        rise, low, high = bootstrap(_rise, needs, seed=seed)
        theirs_text = _signed(_rise(control_needs), 2) if all(control_needs) else "n/a"
        rows.append((PROPERTY_NAMES[2], seed, _signed(rise, 2),
                     f"mean designed NEED {_mean(needs[0]):.2f} -> {_mean(needs[1]):.2f} (third -> last quarter of the "
                     f"rounds), 95% interval of the rise resampling each quarter's rounds [{_signed(low, 2)}, "
                     f"{_signed(high, 2)}]; agent digit accuracy {accuracy[0]:.2f} -> {accuracy[1]:.2f}; the "
                     f"control's designs (never trained) moved {theirs_text}", low > 0 and accuracy[1] > accuracy[0]))
    order = {name: i for i, name in enumerate(PROPERTY_NAMES)}  # one property's rows together, seeds in order
    rows = rows[:len(trained)] + sorted(rows[len(trained):], key=lambda row: order[row[0]])
    return rows, all(row[-1] for row in rows)


def heldout_rows(trained: dict, control: dict, base: dict) -> tuple[list, bool]:
    """(d) the held-out score at the last checkpoint, trained vs control. ``trained`` / ``control``: seed -> {item id:
    score} at each run's last checkpoint; ``base``: {item id: score} of the base model (every run starts from it).
    Per seed the paired difference (trained - control, item by item) must be above 0; pooled over the seeds (the mean
    of the seeds' differences, resampling the items within each seed) its 95% interval must exclude 0. The detail
    says what the control learnt from the base model."""
    rows, diffs = [], []
    for seed in sorted(trained):
        mine, theirs = trained[seed], control.get(seed)
        if theirs is None or sorted(mine) != sorted(theirs) or sorted(mine) != sorted(base):
            raise MechanismInputError(f"seed {seed}: the held-out results of the trained run, its control and the base "
                                      "model must score the same items")
        ids = sorted(mine)
        paired = [mine[i] - theirs[i] for i in ids]
        diffs.append(paired)
        diff, low, high = bootstrap(lambda lists: _mean(lists[0]), [paired], seed=seed)
        rows.append(("(d) held-out win rate, last checkpoint: trained - control", seed, _signed(diff),
                     f"trained {_mean(mine.values()):.3f}, control {_mean(theirs.values()):.3f}, base model "
                     f"{_mean(base.values()):.3f} over {len(ids)} held-out items; 95% interval resampling the items "
                     f"[{_signed(low)}, {_signed(high)}]", diff > 0))
    if diffs:
        diff, low, high = bootstrap(lambda lists: sum(_mean(x) for x in lists) / len(lists), diffs)
        learnt = _mean(_mean(control[s].values()) - _mean(base.values()) for s in sorted(trained))
        rows.append(("(d) held-out win rate, last checkpoint: trained - control", "all", _signed(diff),
                     f"mean over {len(diffs)} seeds; 95% interval resampling the items within each seed "
                     f"[{_signed(low)}, {_signed(high)}]; the controls learnt {_signed(learnt)} over the base model",
                     low > 0))
    return rows, all(row[-1] for row in rows)


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"

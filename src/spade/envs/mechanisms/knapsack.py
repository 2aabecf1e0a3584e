"""Multi-period knapsack: each period brings a few items and a budget credit; unused credit carries over.

theta: per period a credit ``b_t`` and items with visible weights and hidden values (the agentic
presentation shows a value range per item; ``inspect X`` reveals the exact value). In period ``t`` the
agent takes any subset of that period's items whose weight fits the credit accumulated so far minus
what it already spent. Utility = total value taken.

Solver: DP over (period, carried credit). Default: in each period, take items in decreasing order of
(range midpoint / weight) while they fit (greedy, no look-ahead, no probing). Idle: take nothing (0).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

from spade.configtools import option
from spade.envs.mechanisms.base import (
    MechanismFamily,
    SamplerConfig,
    register_mechanism,
)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class KnapsackConfig(SamplerConfig):
    periods: int = option(3, "Number of periods.", min=1)
    items_per_period: int = option(3, "Items offered in each period.", min=1)
    max_weight: int = option(8, "Item weights are drawn from 1..max_weight.", min=1)
    max_value: int = option(30, "Item values are drawn from 1..max_value.", min=1)
    range_width: int = option(12, "Width of the value range shown for a hidden value.", min=0)

    def __post_init__(self):
        if self.periods * self.items_per_period > len(LETTERS):
            raise ValueError(f"periods * items_per_period must be <= {len(LETTERS)}, got "
                             f"{self.periods} * {self.items_per_period}")


def knapsack_available(params, decisions):
    t = len(decisions)
    spent = sum(params["weights"][s][i] for s, chosen in enumerate(decisions) for i in chosen)
    return sum(params["budgets"][: t + 1]) - spent


def utility(params, decisions):
    return float(sum(params["values"][t][i] for t, chosen in enumerate(decisions) for i in chosen))


def advance(params, decisions, words):
    t = len(decisions)
    if words[0] != "take":
        return False, "Unknown command '" + words[0] + "'.", False
    labels = params["labels"][t]
    picks = [w.upper() for w in words[1:]]
    if not picks:
        return False, "List this period's items to take, or write 'take none'.", False
    if picks == ["NONE"]:
        picks = []
    if any(p not in labels for p in picks) or len(set(picks)) != len(picks):
        return False, "Period " + str(t + 1) + " offers items " + ", ".join(labels) + "; list each at most once.", False
    chosen = sorted(labels.index(p) for p in picks)
    available = knapsack_available(params, decisions)
    weight = sum(params["weights"][t][i] for i in chosen)
    if weight > available:
        return False, "Too heavy: weight " + str(weight) + " exceeds the available credit " + str(available) + ".", False
    decisions.append(chosen)
    text = "Period " + str(t + 1) + ": took " + (" ".join(labels[i] for i in chosen) or "nothing") + " (weight " + str(weight) + ")."
    if len(decisions) == params["periods"]:
        return True, text, True
    return True, text + " Period " + str(t + 2) + " begins; available credit " + str(knapsack_available(params, decisions)) + ".", False


class Knapsack(MechanismFamily):
    name = "knapsack"
    title = "Multi-period knapsack with carried-over credit"
    solver = "dynamic programming over (period, carried credit)"
    config_cls = KnapsackConfig
    env_functions = (knapsack_available, utility, advance)
    commands_help = "Commands: take X Y (items of the current period) | take none | inspect X | finish."

    def sample(self, config, rng):
        n, k = config.periods, config.items_per_period
        weights = [[rng.randint(1, config.max_weight) for _ in range(k)] for _ in range(n)]
        values = [[rng.randint(1, config.max_value) for _ in range(k)] for _ in range(n)]
        ranges = []
        for row in values:
            lows = [max(0, v - rng.randint(0, config.range_width)) for v in row]
            ranges.append([[low, low + config.range_width] for low in lows])
        budgets = [max(1, sum(row) * rng.randint(30, 50) // 100) for row in weights]
        labels = [[LETTERS[t * k + i] for i in range(k)] for t in range(n)]
        return {"periods": n, "budgets": budgets, "weights": weights, "values": values, "ranges": ranges,
                "labels": labels}

    def solve(self, params):
        n, weights, values, budgets = params["periods"], params["weights"], params["values"], params["budgets"]

        @cache
        def best(t, carried):
            if t == n:
                return 0, ()
            available = carried + budgets[t]
            top = (-1, ())
            for size in range(len(weights[t]) + 1):
                for combo in itertools.combinations(range(len(weights[t])), size):
                    weight = sum(weights[t][i] for i in combo)
                    if weight > available:
                        continue
                    rest, plan = best(t + 1, available - weight)
                    total = sum(values[t][i] for i in combo) + rest
                    if total > top[0]:
                        top = (total, (list(combo),) + plan)
            return top

        value, plan = best(0, 0)
        return float(value), list(plan)

    def default_policy(self, params):
        decisions = []
        for t in range(params["periods"]):
            available = knapsack_available(params, decisions)
            mids = [(low + high) / 2 for low, high in params["ranges"][t]]
            order = sorted(range(len(mids)), key=lambda i: (-mids[i] / params["weights"][t][i], i))
            chosen = []
            for i in order:
                if params["weights"][t][i] <= available:
                    chosen.append(i)
                    available -= params["weights"][t][i]
            decisions.append(sorted(chosen))
        return decisions

    def brute_force(self, params):
        per_period = [[c for size in range(len(w) + 1) for c in itertools.combinations(range(len(w)), size)]
                      for w in params["weights"]]
        best = 0.0
        for plan in itertools.product(*per_period):
            decisions, feasible = [], True
            for chosen in plan:
                if sum(params["weights"][len(decisions)][i] for i in chosen) > knapsack_available(params, decisions):
                    feasible = False
                    break
                decisions.append(list(chosen))
            if feasible:
                best = max(best, utility(params, decisions))
        return best

    def actions(self, params, decisions):
        return ["take " + (" ".join(params["labels"][t][i] for i in chosen) or "none")
                for t, chosen in enumerate(decisions)]

    def reveals(self, params):
        return {params["labels"][t][i]: f"Item {params['labels'][t][i]} is worth exactly {v}."
                for t, row in enumerate(params["values"]) for i, v in enumerate(row)}

    def intro(self, params, presentation, probe_budget):
        lines = ["You plan purchases over " + str(params["periods"]) + " periods. Each period adds credit; unused "
                 "credit carries over, but you can never spend credit of a later period."]
        for t in range(params["periods"]):
            items = []
            for i, label in enumerate(params["labels"][t]):
                if presentation == "written":
                    worth = f"value {params['values'][t][i]}"
                else:
                    low, high = params["ranges"][t][i]
                    worth = f"value between {low} and {high}"
                items.append(f"{label} (weight {params['weights'][t][i]}, {worth})")
            lines.append(f"Period {t + 1}: credit +{params['budgets'][t]}; items " + "; ".join(items) + ".")
        lines.append("Maximise the total value taken. One command per turn inside \\boxed{...}: "
                     "'take X Y' commits the current period's items and moves on ('take none' skips); "
                     + ("'inspect X' reveals an item's exact value; " if presentation == "agentic" else "")
                     + "'finish' ends early. We are in period 1.")
        return "\n".join(lines)


register_mechanism(Knapsack())

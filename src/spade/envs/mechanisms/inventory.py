"""Finite-horizon inventory control with a fixed ordering cost and lost sales.

theta: horizon T, start stock, shelf capacity, price, unit and fixed order cost, holding cost, and a
demand per period (deterministic but hidden in the agentic presentation: each period shows a forecast
range; ``inspect P3`` reveals period 3's demand). Each period the agent orders ``q`` (delivered at
once, stock + q <= capacity), sells ``min(stock, demand)``, pays holding on what is left; unmet demand
is lost. Utility = total profit.

Solver: Bellman DP over (period, stock). Default: order up to the forecast midpoint each period
(myopic, no probing). Idle: order nothing (sell the start stock only).
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


@dataclass(frozen=True)
class InventoryConfig(SamplerConfig):
    periods: int = option(4, "Horizon T (periods).", min=1)
    capacity: int = option(8, "Shelf capacity: stock after ordering is at most this.", min=1)
    max_demand: int = option(7, "Demands are drawn from 0..max_demand.", min=0)
    range_width: int = option(4, "Width of the forecast range shown for a hidden demand.", min=0)


def inventory_period(params, stock, order, demand):
    level = stock + order
    sold = min(level, demand)
    left = level - sold
    profit = params["price"] * sold - params["unit_cost"] * order - (params["fixed_cost"] if order > 0 else 0)
    return profit - params["holding"] * left, sold, left


def utility(params, decisions):
    stock, total = params["start_stock"], 0.0
    for t in range(params["periods"]):
        order = decisions[t] if t < len(decisions) else 0
        profit, _, stock = inventory_period(params, stock, order, params["demands"][t])
        total += profit
    return float(total)


def advance(params, decisions, words):
    t = len(decisions)
    if words[0] != "order":
        return False, "Unknown command '" + words[0] + "'.", False
    if len(words) != 2 or not (len(words[1]) <= 6 and words[1].isdecimal()):
        return False, "Write 'order Q' with a whole number Q >= 0.", False
    stock = params["start_stock"]
    for s, q in enumerate(decisions):
        stock = inventory_period(params, stock, q, params["demands"][s])[2]
    order = int(words[1])
    if stock + order > params["capacity"]:
        return False, "Stock " + str(stock) + " + order " + str(order) + " exceeds the capacity " + str(params["capacity"]) + ".", False
    profit, sold, left = inventory_period(params, stock, order, params["demands"][t])
    decisions.append(order)
    text = ("Period " + str(t + 1) + ": ordered " + str(order) + ", demand was " + str(params["demands"][t]) + ", sold "
            + str(sold) + ", profit " + str(profit) + ", stock now " + str(left) + ".")
    return True, text, len(decisions) == params["periods"]


class Inventory(MechanismFamily):
    name = "inventory"
    title = "Inventory control with fixed order cost and lost sales"
    solver = "Bellman dynamic programming over (period, stock)"
    config_cls = InventoryConfig
    env_functions = (inventory_period, utility, advance)
    commands_help = "Commands: order Q (this period's order, Q >= 0) | inspect P1 | finish."

    def sample(self, config, rng):
        demands = [rng.randint(0, config.max_demand) for _ in range(config.periods)]
        ranges = []
        for d in demands:
            low = max(0, d - rng.randint(0, config.range_width))
            ranges.append([low, low + config.range_width])
        price = rng.randint(4, 8)
        return {"periods": config.periods, "capacity": config.capacity, "start_stock": rng.randint(0, 2),
                "price": price, "unit_cost": rng.randint(1, price - 2), "fixed_cost": rng.randint(2, 8),
                "holding": rng.randint(1, 2), "demands": demands, "ranges": ranges}

    def solve(self, params):
        @cache
        def value(t, stock):
            if t == params["periods"]:
                return 0, ()
            best = None
            for order in range(params["capacity"] - stock + 1):
                profit, _, left = inventory_period(params, stock, order, params["demands"][t])
                rest, plan = value(t + 1, left)
                if best is None or profit + rest > best[0]:
                    best = (profit + rest, (order,) + plan)
            return best

        total, plan = value(0, params["start_stock"])
        return float(total), list(plan)

    def default_policy(self, params):
        stock, decisions = params["start_stock"], []
        for t in range(params["periods"]):
            low, high = params["ranges"][t]
            target = min(params["capacity"], (low + high) // 2)
            order = max(0, target - stock)
            decisions.append(order)
            stock = inventory_period(params, stock, order, params["demands"][t])[2]
        return decisions

    def brute_force(self, params):
        best = None
        for plan in itertools.product(range(params["capacity"] + 1), repeat=params["periods"]):
            stock, feasible = params["start_stock"], True
            for t, order in enumerate(plan):
                if stock + order > params["capacity"]:
                    feasible = False
                    break
                stock = inventory_period(params, stock, order, params["demands"][t])[2]
            if feasible:
                u = utility(params, list(plan))
                best = u if best is None else max(best, u)
        return best

    def actions(self, params, decisions):
        return [f"order {q}" for q in decisions]

    def reveals(self, params):
        return {f"P{t + 1}": f"Demand in period {t + 1} is exactly {d}." for t, d in enumerate(params["demands"])}

    def intro(self, params, presentation, probe_budget):
        if presentation == "written":
            demand = ", ".join(f"P{t + 1}: {d}" for t, d in enumerate(params["demands"]))
        else:
            demand = ", ".join(f"P{t + 1}: {lo}-{hi}" for t, (lo, hi) in enumerate(params["ranges"]))
        return "\n".join([
            f"You run a shop for {params['periods']} periods. Start stock {params['start_stock']}, shelf capacity "
            f"{params['capacity']} (stock after ordering). Price {params['price']} per unit sold; ordering costs "
            f"{params['unit_cost']} per unit plus {params['fixed_cost']} per non-zero order; each unit left at the end "
            f"of a period costs {params['holding']}. Unmet demand is lost; stock left after the last period is worthless.",
            ("Demand per period: " if presentation == "written" else "Demand forecast ranges: ") + demand + ".",
            "Maximise total profit. One command per turn inside \\boxed{...}: 'order Q' places this period's order "
            "and plays the period; " + ("'inspect P2' reveals period 2's exact demand; " if presentation == "agentic" else "")
            + "'finish' ends early (no further orders). We are in period 1.",
        ])


register_mechanism(Inventory())

"""Production planning linear program (integer quantities), solved with HiGHS.

theta: products with hidden unit profits (agentic presentation: a profit range; ``inspect P2`` reveals
product 2's profit), resources with visible capacities and a visible usage matrix, and a per-product
upper bound. The agent commits a production vector once (``produce 3 0 2``). Utility = profit of a
feasible plan (infeasible plans are refused, not scored). Idle: produce nothing (0).

Deviation from VHD-Play's continuous LP: quantities are integers so that the optimal plan can be typed
and replayed exactly; the reference solver is scipy's HiGHS (``scipy.optimize.milp``). Default: greedy
by estimated profit per unit of total resource use, each product produced as much as still fits.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from spade.configtools import option
from spade.envs.mechanisms.base import (
    MechanismFamily,
    SamplerConfig,
    register_mechanism,
)


@dataclass(frozen=True)
class LPConfig(SamplerConfig):
    products: int = option(3, "Number of products (decision variables).", min=1)
    resources: int = option(2, "Number of resources (constraints).", min=1)
    max_usage: int = option(5, "Usage coefficients are drawn from 1..max_usage.", min=1)
    max_quantity: int = option(8, "Upper bound on each product's quantity.", min=1)
    max_profit: int = option(20, "Profits are drawn from 1..max_profit.", min=1)
    range_width: int = option(10, "Width of the profit range shown for a hidden profit.", min=0)


def lp_feasible(params, plan):
    if len(plan) != len(params["profit"]) or any(x < 0 or x > params["upper"] for x in plan):
        return False
    return all(sum(a * x for a, x in zip(row, plan)) <= cap for row, cap in zip(params["usage"], params["capacity"]))


def utility(params, decisions):
    if not decisions:
        return 0.0
    return float(sum(c * x for c, x in zip(params["profit"], decisions[0])))


def advance(params, decisions, words):
    if words[0] != "produce":
        return False, "Unknown command '" + words[0] + "'.", False
    n = len(params["profit"])
    if len(words) != n + 1 or not all(len(w) <= 6 and w.isdecimal() for w in words[1:]):
        return False, "Write 'produce' followed by " + str(n) + " whole numbers, one per product.", False
    plan = [int(w) for w in words[1:]]
    if not lp_feasible(params, plan):
        return False, "Plan " + str(plan) + " breaks a resource capacity or the per-product limit " + str(params["upper"]) + ".", False
    decisions.append(plan)
    return True, "Produced " + str(plan) + ".", True


class LinearProgram(MechanismFamily):
    name = "lp"
    title = "Production planning (integer linear program)"
    solver = "HiGHS via scipy.optimize.milp"
    config_cls = LPConfig
    env_functions = (lp_feasible, utility, advance)
    commands_help = "Commands: produce X1 X2 ... (final) | inspect P1 | finish."

    def sample(self, config, rng):
        n, m = config.products, config.resources
        usage = [[rng.randint(1, config.max_usage) for _ in range(n)] for _ in range(m)]
        capacity = [max(1, sum(row) * rng.randint(150, 300) // 100) for row in usage]
        profit = [rng.randint(1, config.max_profit) for _ in range(n)]
        ranges = []
        for c in profit:
            low = max(0, c - rng.randint(0, config.range_width))
            ranges.append([low, low + config.range_width])
        return {"usage": usage, "capacity": capacity, "profit": profit, "ranges": ranges, "upper": config.max_quantity}

    def solve(self, params):
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp

        n = len(params["profit"])
        result = milp(-np.array(params["profit"], dtype=float),
                      constraints=LinearConstraint(np.array(params["usage"], dtype=float), -np.inf,
                                                   np.array(params["capacity"], dtype=float)),
                      integrality=np.ones(n), bounds=Bounds(0, params["upper"]))
        if not result.success:
            raise ValueError(f"HiGHS failed on an LP instance: {result.message}")
        plan = [round(x) for x in result.x]
        if not lp_feasible(params, plan):
            raise ValueError(f"HiGHS returned {list(result.x)}, infeasible after rounding")
        return utility(params, [plan]), [plan]

    def default_policy(self, params):
        n = len(params["profit"])
        mids = [(low + high) / 2 for low, high in params["ranges"]]
        weight = [sum(row[j] for row in params["usage"]) for j in range(n)]
        plan = [0] * n
        for j in sorted(range(n), key=lambda j: (-mids[j] / weight[j], j)):
            while plan[j] < params["upper"]:
                plan[j] += 1
                if not lp_feasible(params, plan):
                    plan[j] -= 1
                    break
        return [plan]

    def brute_force(self, params):
        n = len(params["profit"])
        return max(utility(params, [list(p)]) for p in itertools.product(range(params["upper"] + 1), repeat=n)
                   if lp_feasible(params, list(p)))

    def actions(self, params, decisions):
        return ["produce " + " ".join(str(x) for x in plan) for plan in decisions]

    def reveals(self, params):
        return {f"P{j + 1}": f"Product P{j + 1} earns exactly {c} per unit." for j, c in enumerate(params["profit"])}

    def intro(self, params, presentation, probe_budget):
        n = len(params["profit"])
        products = []
        for j in range(n):
            if presentation == "written":
                products.append(f"P{j + 1}: profit {params['profit'][j]} per unit")
            else:
                low, high = params["ranges"][j]
                products.append(f"P{j + 1}: profit between {low} and {high} per unit")
        resources = []
        for i, (row, cap) in enumerate(zip(params["usage"], params["capacity"])):
            use = ", ".join(f"{a} per P{j + 1}" for j, a in enumerate(row))
            resources.append(f"R{i + 1} (capacity {cap}): uses {use}")
        return "\n".join([
            "Plan whole-number production quantities. Products: " + "; ".join(products) + ".",
            "Resources: " + "; ".join(resources) + f". Each product is limited to {params['upper']} units.",
            "Maximise total profit. One command per turn inside \\boxed{...}: 'produce "
            + " ".join(["X"] * n) + "' commits the plan and ends the game; "
            + ("'inspect P1' reveals a product's exact profit; " if presentation == "agentic" else "")
            + "'finish' ends without producing.",
        ])


register_mechanism(LinearProgram())

"""Uncapacitated facility location with a probe budget.

theta: candidate sites and customers on a grid (visible), customer demands (visible) and site opening
costs (hidden in the agentic presentation: a cost range per site; ``inspect A`` reveals site A's cost,
at most ``probe_budget`` sites). The agent opens a set of sites once (``open A C``); each customer is
served by its nearest open site. Utility = -(opening costs + sum demand x Manhattan distance). Opening
nothing serves no one: every customer then costs demand x 2 x (grid size x 2).

u* is the full-information optimum (the probe budget limits what the agent can learn, not what it may
do). Solver: enumeration of all non-empty site sets. Default: greedy site addition using the range
midpoints as costs (no probing). Idle: open nothing.
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

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class FacilityConfig(SamplerConfig):
    sites: int = option(5, "Candidate sites (enumeration over 2^sites sets).", min=1)
    customers: int = option(7, "Customers.", min=1)
    grid: int = option(10, "Coordinates are drawn from 0..grid.", min=1)
    max_demand: int = option(4, "Demands are drawn from 1..max_demand.", min=1)
    min_cost: int = option(5, "Smallest opening cost.", min=0)
    max_cost: int = option(40, "Largest opening cost.", min=0)
    range_width: int = option(20, "Width of the cost range shown for a hidden cost.", min=0)
    probe_budget: int = option(2, "Sites whose cost the agent may inspect (agentic presentation).", min=0)

    def __post_init__(self):
        if self.sites > 16:
            raise ValueError(f"sites must be <= 16 for enumeration, got {self.sites}")
        if self.max_cost < self.min_cost:
            raise ValueError(f"max_cost ({self.max_cost}) must be >= min_cost ({self.min_cost})")


def facility_cost(params, opened, costs):
    if not opened:
        return sum(q * 4 * params["grid"] for q in params["demand"])
    total = sum(costs[i] for i in opened)
    for (cx, cy), q in zip(params["customers"], params["demand"]):
        total += q * min(abs(cx - params["sites"][i][0]) + abs(cy - params["sites"][i][1]) for i in opened)
    return total


def utility(params, decisions):
    opened = decisions[0] if decisions else []
    return float(-facility_cost(params, opened, params["costs"]))


def advance(params, decisions, words):
    if words[0] != "open":
        return False, "Unknown command '" + words[0] + "'.", False
    labels = params["labels"]
    picks = [w.upper() for w in words[1:]]
    if not picks:
        return False, "Name the sites to open, e.g. 'open " + labels[0] + "'.", False
    if any(p not in labels for p in picks) or len(set(picks)) != len(picks):
        return False, "Sites are " + ", ".join(labels) + "; name each once.", False
    opened = sorted(labels.index(p) for p in picks)
    decisions.append(opened)
    return True, "Opened " + " ".join(labels[i] for i in opened) + ".", True


class Facility(MechanismFamily):
    name = "facility"
    title = "Facility location with a probe budget"
    solver = "enumeration of all non-empty site sets"
    config_cls = FacilityConfig
    env_functions = (facility_cost, utility, advance)
    commands_help = "Commands: open X Y (final) | inspect X | finish."

    def sample(self, config, rng):
        point = lambda: [rng.randint(0, config.grid), rng.randint(0, config.grid)]
        costs = [rng.randint(config.min_cost, config.max_cost) for _ in range(config.sites)]
        ranges = []
        for c in costs:
            low = max(0, c - rng.randint(0, config.range_width))
            ranges.append([low, low + config.range_width])
        return {"grid": config.grid, "sites": [point() for _ in range(config.sites)],
                "customers": [point() for _ in range(config.customers)],
                "demand": [rng.randint(1, config.max_demand) for _ in range(config.customers)],
                "costs": costs, "ranges": ranges, "labels": list(LETTERS[: config.sites]),
                "probe_budget": config.probe_budget}

    def solve(self, params):
        m = len(params["sites"])
        best = None
        for size in range(1, m + 1):
            for combo in itertools.combinations(range(m), size):
                cost = facility_cost(params, list(combo), params["costs"])
                if best is None or cost < best[0]:
                    best = (cost, list(combo))
        return float(-best[0]), [best[1]]

    def default_policy(self, params):
        estimates = [(low + high) / 2 for low, high in params["ranges"]]
        opened, current = [], facility_cost(params, [], estimates)
        while True:
            options = [(facility_cost(params, sorted(opened + [i]), estimates), i)
                       for i in range(len(params["sites"])) if i not in opened]
            if not options:
                break
            cost, site = min(options)
            if cost >= current:
                break
            opened, current = sorted(opened + [site]), cost
        return [opened]

    def brute_force(self, params):
        """Independent check: the same problem as a mixed-integer program solved by HiGHS."""
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp

        m, n = len(params["sites"]), len(params["customers"])
        dist = [[q * (abs(cx - sx) + abs(cy - sy)) for (sx, sy) in params["sites"]]
                for (cx, cy), q in zip(params["customers"], params["demand"])]
        c = np.array(list(params["costs"]) + [dist[j][i] for j in range(n) for i in range(m)], dtype=float)
        rows, lower, upper = [], [], []
        for j in range(n):  # each customer assigned once
            row = np.zeros(m + m * n)
            row[m + j * m: m + (j + 1) * m] = 1
            rows.append(row), lower.append(1), upper.append(1)
        for j in range(n):  # assign only to open sites
            for i in range(m):
                row = np.zeros(m + m * n)
                row[m + j * m + i], row[i] = 1, -1
                rows.append(row), lower.append(-np.inf), upper.append(0)
        result = milp(c, constraints=LinearConstraint(np.array(rows), lower, upper),
                      integrality=np.ones(m + m * n), bounds=Bounds(0, 1))
        if not result.success:
            raise ValueError(f"HiGHS failed on a facility instance: {result.message}")
        return float(-round(result.fun, 6))

    def actions(self, params, decisions):
        return ["open " + " ".join(params["labels"][i] for i in opened) for opened in decisions]

    def probe_budget(self, params):
        return params["probe_budget"]

    def reveals(self, params):
        return {label: f"Site {label} costs exactly {params['costs'][i]} to open." for i, label in enumerate(params["labels"])}

    def intro(self, params, presentation, probe_budget):
        sites = []
        for i, label in enumerate(params["labels"]):
            if presentation == "written":
                cost = f"opening cost {params['costs'][i]}"
            else:
                low, high = params["ranges"][i]
                cost = f"opening cost between {low} and {high}"
            sites.append(f"{label} at {tuple(params['sites'][i])}, {cost}")
        customers = [f"{tuple(xy)} demand {q}" for xy, q in zip(params["customers"], params["demand"])]
        return "\n".join([
            "Choose which sites to open. Candidate sites: " + "; ".join(sites) + ".",
            "Customers: " + "; ".join(customers) + ".",
            "Each customer is served by its nearest open site (Manhattan distance) at cost demand x distance. "
            "Minimise opening costs plus service costs; opening nothing leaves every customer unserved at cost "
            f"demand x {4 * params['grid']}.",
            "One command per turn inside \\boxed{...}: 'open A C' opens those sites and ends the game; "
            + (f"'inspect A' reveals a site's exact cost (at most {probe_budget} sites); " if presentation == "agentic" else "")
            + "'finish' ends without opening anything.",
        ])


register_mechanism(Facility())

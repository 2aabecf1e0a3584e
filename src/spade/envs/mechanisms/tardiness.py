"""Single-machine total weighted tardiness (1 || sum w_j T_j), small n.

theta: jobs with visible processing times and due dates and hidden weights (agentic presentation: a
weight range; ``inspect B`` reveals B's weight). Utility = -sum w_j max(0, C_j - d_j); a job never run
completes at 2 * (sum of all processing times).

Solver: DP over subsets (the last job of a subset S finishes at p(S)). Default: earliest due date
first (greedy on the visible due dates, no probing). Idle: run nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from spade.configtools import option
from spade.envs.mechanisms.base import (
    SamplerConfig,
    register_mechanism,
)
from spade.envs.mechanisms.scheduling import JobSequencing, advance

MAX_JOBS = 12


@dataclass(frozen=True)
class TardinessConfig(SamplerConfig):
    jobs: int = option(5, f"Number of jobs (DP over 2^n subsets; at most {MAX_JOBS}).", min=2)
    max_processing: int = option(8, "Processing times are drawn from 1..max_processing.", min=1)
    max_weight: int = option(10, "Weights are drawn from 1..max_weight.", min=1)
    range_width: int = option(8, "Width of the weight range shown for a hidden weight.", min=0)
    due_tightness: float = option(0.6, "Due dates are drawn from 1..tightness * (sum of processing times).", min=0.05)

    def __post_init__(self):
        if self.jobs > MAX_JOBS:
            raise ValueError(f"jobs must be <= {MAX_JOBS} for the subset DP, got {self.jobs}")


def utility(params, decisions):
    horizon = sum(params["processing"])
    clock, total, done = 0, 0, set()
    for j in decisions:
        clock += params["processing"][j]
        total += params["weights"][j] * max(0, clock - params["due"][j])
        done.add(j)
    for j in range(len(params["processing"])):
        if j not in done:
            total += params["weights"][j] * max(0, 2 * horizon - params["due"][j])
    return float(-total)


class Tardiness(JobSequencing):
    name = "tardiness"
    title = "Single-machine total weighted tardiness"
    solver = "dynamic programming over subsets of jobs"
    config_cls = TardinessConfig
    env_functions = (utility, advance)

    def sample(self, config, rng):
        params = self.sample_jobs(config, rng)
        limit = max(1, int(config.due_tightness * sum(params["processing"])))
        params["due"] = [rng.randint(1, limit) for _ in range(config.jobs)]
        return params

    def solve(self, params):
        p, w, d = params["processing"], params["weights"], params["due"]
        n = len(p)
        best = {0: (0, ())}
        for mask in range(1, 1 << n):
            length = sum(p[j] for j in range(n) if mask >> j & 1)
            top = None
            for j in range(n):
                if mask >> j & 1:
                    cost, order = best[mask & ~(1 << j)]
                    cost += w[j] * max(0, length - d[j])
                    if top is None or cost < top[0]:
                        top = (cost, order + (j,))
            best[mask] = top
        cost, order = best[(1 << n) - 1]
        return float(-cost), list(order)

    def default_policy(self, params):
        return sorted(range(len(params["due"])), key=lambda j: (params["due"][j], j))

    def intro(self, params, presentation, probe_budget):
        return self.job_intro(params, presentation, lambda j: f", due {params['due'][j]}",
                              "A job finishing after its due date costs weight x lateness; a job you never run counts "
                              f"as finishing at {2 * sum(params['processing'])}. Minimise the total weighted lateness.")


register_mechanism(Tardiness())

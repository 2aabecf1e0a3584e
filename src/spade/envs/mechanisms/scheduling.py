"""Single-machine scheduling, total weighted completion time (1 || sum w_j C_j).

theta: jobs with visible processing times and hidden weights (the agentic presentation shows a weight
range; ``inspect B`` reveals job B's weight). The agent runs jobs one after another (``run B``).
Utility = -sum w_j C_j; a job never run completes at 2 * (sum of all processing times).

Solver: Smith's rule (non-decreasing p_j / w_j, exact). Default: the same rule on the range midpoints
of the weights (greedy on visible values, no probing). Idle: run nothing.
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
class SchedulingConfig(SamplerConfig):
    jobs: int = option(5, "Number of jobs.", min=2)
    max_processing: int = option(9, "Processing times are drawn from 1..max_processing.", min=1)
    max_weight: int = option(10, "Weights are drawn from 1..max_weight.", min=1)
    range_width: int = option(8, "Width of the weight range shown for a hidden weight.", min=0)

    def __post_init__(self):
        if self.jobs > len(LETTERS):
            raise ValueError(f"jobs must be <= {len(LETTERS)}, got {self.jobs}")


def utility(params, decisions):
    horizon = sum(params["processing"])
    clock, total, done = 0, 0, set()
    for j in decisions:
        clock += params["processing"][j]
        total += params["weights"][j] * clock
        done.add(j)
    for j in range(len(params["processing"])):
        if j not in done:
            total += params["weights"][j] * 2 * horizon
    return float(-total)


def advance(params, decisions, words):
    if words[0] != "run":
        return False, "Unknown command '" + words[0] + "'.", False
    labels = params["labels"]
    picks = [w.upper() for w in words[1:]]
    if not picks:
        return False, "Name the job(s) to run next, e.g. 'run " + labels[0] + "'.", False
    if any(p not in labels for p in picks) or len(set(picks)) != len(picks):
        return False, "Jobs are " + ", ".join(labels) + "; name each once.", False
    repeated = [p for p in picks if labels.index(p) in decisions]
    if repeated:
        return False, "Already run: " + ", ".join(repeated) + ".", False
    for p in picks:
        decisions.append(labels.index(p))
    clock = sum(params["processing"][j] for j in decisions)
    text = "Ran " + " ".join(picks) + "; the machine clock is now " + str(clock) + "."
    return True, text, len(decisions) == len(labels)


def smith_order(processing, weights):
    return sorted(range(len(processing)), key=lambda j: (processing[j] / weights[j], j))


class JobSequencing(MechanismFamily):
    """What the single-machine families (this one, weighted tardiness) share: jobs with processing times and
    hidden weights (a range is shown until 'inspect'), 'run X' commands, brute force over all orders."""

    commands_help = "Commands: run X (next job; 'run X Y' runs several in order) | inspect X | finish."

    def sample_jobs(self, config, rng) -> dict:
        n = config.jobs
        processing = [rng.randint(1, config.max_processing) for _ in range(n)]
        weights = [rng.randint(1, config.max_weight) for _ in range(n)]
        ranges = []
        for w in weights:
            low = max(0, w - rng.randint(0, config.range_width))
            ranges.append([low, low + config.range_width])
        return {"processing": processing, "weights": weights, "ranges": ranges, "labels": list(LETTERS[:n])}

    def brute_force(self, params):
        utility_fn = self.env_functions[0]
        return max(utility_fn(params, list(p)) for p in itertools.permutations(range(len(params["processing"]))))

    def actions(self, params, decisions):
        return [f"run {params['labels'][j]}" for j in decisions]

    def reveals(self, params):
        return {label: f"Job {label} has weight exactly {params['weights'][j]}." for j, label in enumerate(params["labels"])}

    def job_intro(self, params, presentation, job_extra, cost_text: str) -> str:
        """The first observation: ``job_extra(j)`` adds family-specific facts to job j's description."""
        jobs = []
        for j, label in enumerate(params["labels"]):
            if presentation == "written":
                weight = f"weight {params['weights'][j]}"
            else:
                low, high = params["ranges"][j]
                weight = f"weight between {low} and {high}"
            jobs.append(f"{label} (processing time {params['processing'][j]}{job_extra(j)}, {weight})")
        return "\n".join([
            "One machine must process these jobs, one at a time, without idle time: " + "; ".join(jobs) + ".",
            cost_text,
            "One command per turn inside \\boxed{...}: 'run X' runs job X next; "
            + ("'inspect X' reveals job X's exact weight; " if presentation == "agentic" else "")
            + "'finish' stops (remaining jobs never run).",
        ])


class Scheduling(JobSequencing):
    name = "scheduling"
    title = "Single-machine scheduling, total weighted completion time"
    solver = "Smith's rule (order by p_j / w_j)"
    config_cls = SchedulingConfig
    env_functions = (utility, advance)

    def sample(self, config, rng):
        return self.sample_jobs(config, rng)

    def solve(self, params):
        order = smith_order(params["processing"], params["weights"])
        return utility(params, order), order

    def default_policy(self, params):
        mids = [max((low + high) / 2, 1e-9) for low, high in params["ranges"]]
        return smith_order(params["processing"], mids)

    def intro(self, params, presentation, probe_budget):
        return self.job_intro(params, presentation, lambda j: "",
                              "Your cost is the sum over jobs of weight x completion time; a job you never run counts "
                              f"as completing at {2 * sum(params['processing'])}. Minimise the cost.")


register_mechanism(Scheduling())

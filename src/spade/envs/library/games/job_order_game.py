"""Schedule jobs one at a time on a single machine to minimise the total weighted completion time.

Multi-turn game with precedence rules; when every job has run, the reward is the optimal cost
divided by the cost achieved (1.0 only for an optimal order).
"""

import itertools
import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
JOB_NAMES = ["A", "B", "C", "D", "E", "F"]


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


class JobOrderGame:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.jobs = []
        self.durations = {}
        self.weights = {}
        self.requires = {}
        self.order = []
        self.best_order = []
        self.best_cost = 0
        self.turn = 0
        self.done = False
        self.reset()

    def _cost(self, order):
        clock, total = 0, 0
        for job in order:
            clock += self.durations[job]
            total += self.weights[job] * clock
        return total

    def _allowed(self, order):
        seen = set()
        for job in order:
            if any(before not in seen for before in self.requires[job]):
                return False
            seen.add(job)
        return True

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.jobs = JOB_NAMES[: rng.choice([5, 6])]
        self.durations = {j: rng.randint(1, 9) for j in self.jobs}
        self.weights = {j: rng.randint(1, 6) for j in self.jobs}
        self.requires = {j: [] for j in self.jobs}
        for _ in range(rng.choice([1, 2])):
            first, second = rng.sample(self.jobs, 2)
            if first not in self.requires[second] and second not in self.requires[first]:
                self.requires[second].append(first)
        best = None
        for order in itertools.permutations(self.jobs):
            if self._allowed(order):
                cost = self._cost(order)
                if best is None or cost < best:
                    best, self.best_order = cost, list(order)
        self.best_cost = best
        self.order = []
        self.turn = 0
        self.done = False
        lines = ["One machine must run every job exactly once, one job at a time. Jobs (duration, weight):"]
        for j in self.jobs:
            lines.append(f"- job {j}: duration {self.durations[j]}, weight {self.weights[j]}")
        for j in self.jobs:
            for before in self.requires[j]:
                lines.append(f"Rule: job {before} must run before job {j}.")
        lines.append(
            "A job's completion time is the clock when it finishes. Minimise the sum of weight x completion time.\n"
            "Each turn, start the next job with \\boxed{run X} (X is a job letter). When all jobs have run you get "
            "reward = best possible cost / your cost."
        )
        return "\n".join(lines), {"jobs": list(self.jobs)}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        info = {"turn": self.turn, "scheduled": list(self.order)}
        content = first_boxed(action)
        words = content.upper().split() if content is not None else []
        if len(words) != 2 or words[0] != "RUN":
            return "Use \\boxed{run X} with a job letter X.", 0.0, False, truncated, info
        job = words[1]
        if job not in self.jobs:
            return f"There is no job {job}.", 0.0, False, truncated, info
        if job in self.order:
            return f"Job {job} has already run. Done so far: {' '.join(self.order)}.", 0.0, False, truncated, info
        missing = [b for b in self.requires[job] if b not in self.order]
        if missing:
            return f"Job {job} must wait for job {missing[0]}.", 0.0, False, truncated, info
        self.order.append(job)
        info["scheduled"] = list(self.order)
        clock = sum(self.durations[j] for j in self.order)
        if len(self.order) == len(self.jobs):
            self.done = True
            cost = self._cost(self.order)
            reward = self.best_cost / cost
            text = f"All jobs done. Your cost: {cost}; the best possible cost: {self.best_cost}."
            return text, reward, True, truncated, info
        left = [j for j in self.jobs if j not in self.order]
        text = f"Job {job} finished at time {clock}. Done: {' '.join(self.order)}. Remaining: {' '.join(left)}."
        return text, 0.0, False, truncated, info

    def solution(self):
        if self.done:
            return ""
        best, plan = None, []
        rest = [j for j in self.jobs if j not in self.order]
        for tail in itertools.permutations(rest):
            order = self.order + list(tail)
            if self._allowed(order):
                cost = self._cost(order)
                if best is None or cost < best:
                    best, plan = cost, list(tail)
        return "\n".join(f"run {j}" for j in plan)

    def close(self):
        pass

"""Pick the most valuable set of items that fits in a bag (0/1 knapsack).

Single-turn puzzle: any selection that fits and reaches the optimal total value is accepted.
"""

import itertools
import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
LEVELS = ("standard", "easy")  # easy: 3 items instead of 6-8 (a tier a very small model sometimes wins)
LABELS = "ABCDEFGH"
ITEM_NAMES = ["lamp", "rope", "tent", "stove", "map", "knife", "radio", "kettle", "blanket", "camera", "flask", "torch"]


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


def best_value(weights, values, capacity):
    best = 0
    for size in range(len(weights) + 1):
        for combo in itertools.combinations(range(len(weights)), size):
            if sum(weights[i] for i in combo) <= capacity:
                best = max(best, sum(values[i] for i in combo))
    return best


class KnapsackSelection:
    def __init__(self, max_turns=20, level="standard", **kwargs):
        self.max_turns = max_turns
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.names = []
        self.weights = []
        self.values = []
        self.capacity = 0
        self.optimum = 0
        self.best_set = []
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        count = 3 if self.level == "easy" else rng.choice([6, 7, 8])
        while True:
            self.names = rng.sample(ITEM_NAMES, count)
            self.weights = [rng.randint(2, 12) for _ in range(count)]
            self.values = [rng.randint(3, 30) for _ in range(count)]
            self.capacity = sum(self.weights) * rng.randint(35, 55) // 100
            self.optimum = best_value(self.weights, self.values, self.capacity)
            optimal_sets = []
            for size in range(count + 1):
                for combo in itertools.combinations(range(count), size):
                    if sum(self.weights[i] for i in combo) <= self.capacity and sum(self.values[i] for i in combo) == self.optimum:
                        optimal_sets.append(list(combo))
            if all(len(s) >= 2 for s in optimal_sets):
                self.best_set = optimal_sets[0]
                break
        self.turn = 0
        self.done = False
        lines = [f"Your bag holds at most {self.capacity} kg. Available items (label: name, weight, value):"]
        for i in range(count):
            lines.append(f"{LABELS[i]}: {self.names[i]}, {self.weights[i]} kg, value {self.values[i]}")
        lines.append(
            "Choose the items with the largest total value whose total weight fits in the bag. "
            "Answer with the item labels separated by spaces, e.g. \\boxed{A C D}."
        )
        return "\n".join(lines), {"items": count, "capacity": self.capacity}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        answer = first_boxed(action)
        if answer is None:
            return "No answer found. Put the labels inside \\boxed{...}, e.g. \\boxed{A C D}.", 0.0, False, truncated, {"turn": self.turn}
        tokens = answer.upper().replace(",", " ").split()
        labels = LABELS[: len(self.weights)]
        if not tokens or any(len(t) != 1 or t not in labels for t in tokens) or len(set(tokens)) != len(tokens):
            return f"Use distinct single labels from {', '.join(labels)}, separated by spaces.", 0.0, False, truncated, {"turn": self.turn}
        chosen = [labels.index(t) for t in tokens]
        weight = sum(self.weights[i] for i in chosen)
        value = sum(self.values[i] for i in chosen)
        if weight > self.capacity:
            return f"Too heavy: {weight} kg exceeds {self.capacity} kg. Try again.", 0.0, False, truncated, {"turn": self.turn}
        if value == self.optimum:
            self.done = True
            return f"Optimal! Total value {value} at {weight} kg.", 1.0, True, truncated, {"turn": self.turn}
        return f"Fits ({weight} kg) with value {value}, but a more valuable selection exists. Try again.", 0.0, False, truncated, {"turn": self.turn}

    def solution(self):
        return " ".join(LABELS[i] for i in self.best_set)

    def close(self):
        pass

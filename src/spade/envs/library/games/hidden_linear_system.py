"""Hidden integers revealed only through weighted sums: set up and solve a linear system.

Interactive: the agent queries weighted sums with all-positive coefficients, then submits the
unknowns. The final reward is the share of unknowns it got right.
"""

import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
NAMES = ["x", "y", "z", "w"]


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


def parse_ints(text):
    parts = text.replace(",", " ").split()
    if not parts or not all(re.fullmatch(r"-?\d+", p) for p in parts):
        return None
    return [int(p) for p in parts]


class HiddenLinearSystem:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.values = []
        self.queries_left = 0
        self.history = []
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        size = rng.choice([3, 4])
        self.values = [rng.randint(-9, 9) for _ in range(size)]
        self.queries_left = size + 1
        self.history = []
        self.turn = 0
        self.done = False
        names = ", ".join(NAMES[:size])
        example = " ".join(str(i + 1) for i in range(size))
        text = (
            f"There are {size} hidden integers {names}, each between -9 and 9.\n"
            f"Commands (one per turn, inside \\boxed{{...}}):\n"
            f"- \\boxed{{query {example}}} returns 1*{NAMES[0]} + 2*{NAMES[1]} + ... for the coefficients you give. "
            f"Give exactly {size} coefficients, each a whole number from 1 to 9 (zero is not allowed).\n"
            f"- \\boxed{{answer v1 ... v{size}}} submits your values for {names} in that order and ends the game.\n"
            f"You have {self.queries_left} queries. Your score is the share of values you get right."
        )
        return text, {"unknowns": size, "queries_left": self.queries_left}

    def _status(self):
        return f"Queries left: {self.queries_left}. Turn {self.turn}/{self.max_turns}."

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        info = {"turn": self.turn, "queries_left": self.queries_left}
        content = first_boxed(action)
        if content is None:
            return "No command found. Use \\boxed{query ...} or \\boxed{answer ...}. " + self._status(), 0.0, False, truncated, info
        words = content.split(None, 1)
        command = words[0].lower() if words else ""
        numbers = parse_ints(words[1]) if len(words) > 1 else None
        size = len(self.values)
        if command not in ("query", "answer"):
            return f"Unknown command '{content}'. Use query or answer. " + self._status(), 0.0, False, truncated, info
        if numbers is None or len(numbers) != size:
            return f"The {command} command needs exactly {size} whole numbers. " + self._status(), 0.0, False, truncated, info
        if command == "query":
            if self.queries_left <= 0:
                return "You have no queries left; submit an answer. " + self._status(), 0.0, False, truncated, info
            if not all(1 <= c <= 9 for c in numbers):
                return "Every coefficient must be between 1 and 9. " + self._status(), 0.0, False, truncated, info
            self.queries_left -= 1
            total = sum(c * v for c, v in zip(numbers, self.values))
            self.history.append([numbers, total])
            terms = " + ".join(f"{c}*{n}" for c, n in zip(numbers, NAMES))
            info["queries_left"] = self.queries_left
            return f"{terms} = {total}. " + self._status(), 0.0, False, truncated, info
        right = sum(1 for guess, value in zip(numbers, self.values) if guess == value)
        reward = float(right) / float(size)
        self.done = True
        info["correct"] = right
        text = f"You identified {right} of {size} values correctly. The values were {self.values}."
        return text, reward, True, truncated, info

    def solution(self):
        if self.done:
            return ""
        size = len(self.values)
        lines = []
        for row in range(min(size, self.queries_left)):
            coefficients = [1] * size
            if row > 0:
                coefficients[row] = 2
            lines.append("query " + " ".join(str(c) for c in coefficients))
        lines.append("answer " + " ".join(str(v) for v in self.values))
        return "\n".join(lines)

    def close(self):
        pass

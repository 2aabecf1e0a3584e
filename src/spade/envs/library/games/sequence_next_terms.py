"""Continue an integer sequence: find the rule and give the next two terms.

Single-turn puzzle drawn from several rule families (polynomial, geometric, recurrences,
interleaved and alternating-operation sequences).
"""

import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
LEVELS = ("standard", "easy")  # easy: arithmetic sequences only (a tier a very small model sometimes wins)
SHOWN = 6


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


def build_sequence(rng, length):
    family = rng.choice(["quadratic", "geometric", "fibonacci", "interleaved", "alternating", "doubling"])
    if family == "quadratic":
        a, b, c = rng.randint(-10, 10), rng.randint(-6, 6), rng.randint(1, 4)
        return [a + b * i + c * i * i for i in range(length)]
    if family == "geometric":
        a, r = rng.randint(1, 6), rng.choice([2, 3, -2])
        return [a * r**i for i in range(length)]
    if family == "fibonacci":
        terms = [rng.randint(1, 6), rng.randint(1, 9)]
        while len(terms) < length:
            terms.append(terms[-1] + terms[-2])
        return terms
    if family == "interleaved":
        a, d = rng.randint(0, 20), rng.choice([2, 3, 4, 5])
        b, e = rng.randint(30, 60), rng.choice([-3, -2, -1, 1, 2])
        return [a + d * (i // 2) if i % 2 == 0 else b + e * (i // 2) for i in range(length)]
    if family == "alternating":
        add, mul = rng.randint(1, 5), rng.choice([2, 3])
        terms = [rng.randint(1, 5)]
        while len(terms) < length:
            terms.append(terms[-1] + add if len(terms) % 2 == 1 else terms[-1] * mul)
        return terms
    shift = rng.choice([-3, -1, 1, 2, 3])
    terms = [rng.randint(2, 6)]
    while len(terms) < length:
        terms.append(2 * terms[-1] + shift)
    return terms


class SequenceNextTerms:
    def __init__(self, max_turns=20, level="standard", **kwargs):
        self.max_turns = max_turns
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.terms = []
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        if self.level == "easy":
            start, step = rng.randint(1, 9), rng.randint(1, 2)
            self.terms = [start + step * i for i in range(SHOWN + 2)]
        else:
            self.terms = build_sequence(rng, SHOWN + 2)
        self.turn = 0
        self.done = False
        shown = ", ".join(str(t) for t in self.terms[:SHOWN])
        text = (
            f"Find the rule behind this sequence: {shown}, ...\n"
            "Give the next two terms, separated by a space, inside \\boxed{...}, for example \\boxed{12 15}."
        )
        return text, {"shown": SHOWN}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        answer = first_boxed(action)
        if answer is None:
            return "No answer found. Write the two terms inside \\boxed{...}.", 0.0, False, truncated, {"turn": self.turn}
        numbers = re.findall(r"-?\d+", answer)
        if len(numbers) != 2:
            return "Give exactly two whole numbers, e.g. \\boxed{12 15}.", 0.0, False, truncated, {"turn": self.turn}
        guess = [int(n) for n in numbers]
        if guess == self.terms[SHOWN:]:
            self.done = True
            return "Correct!", 1.0, True, truncated, {"turn": self.turn}
        hits = sum(1 for g, t in zip(guess, self.terms[SHOWN:]) if g == t)
        return f"Not quite: {hits} of the 2 terms are right. Try again.", 0.0, False, truncated, {"turn": self.turn}

    def solution(self):
        return " ".join(str(t) for t in self.terms[SHOWN:])

    def close(self):
        pass

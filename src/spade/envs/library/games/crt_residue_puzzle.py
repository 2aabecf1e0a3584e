"""Recover a hidden whole number from its remainders (Chinese remainder theorem).

Single-turn puzzle: the agent answers a number inside \\boxed{...} and may retry until it is right.
"""

import math
import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
LEVELS = ("standard", "easy")  # easy: 2 small moduli (3-5) instead of 3-4 of 4-13 (a tier a very small model sometimes wins)
MODULI_POOL = [4, 5, 7, 9, 11, 13]


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


class CrtResiduePuzzle:
    def __init__(self, max_turns=20, level="standard", **kwargs):
        self.max_turns = max_turns
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.moduli = []
        self.residues = []
        self.target = 0
        self.turn = 0
        self.done = False
        self.prompt = ""
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        if self.level == "easy":
            self.moduli = sorted(rng.sample([3, 4, 5], 2))
            product = math.prod(self.moduli)
            self.target = rng.randint(1, product - 1)
        else:
            count = rng.choice([3, 3, 4])
            self.moduli = sorted(rng.sample(MODULI_POOL, count))
            product = math.prod(self.moduli)
            self.target = rng.randint(101, min(product - 1, 4000))
        self.residues = [self.target % m for m in self.moduli]
        self.turn = 0
        self.done = False
        lines = [
            "A positive whole number N was chosen. You are told its remainders:",
        ]
        for m, r in zip(self.moduli, self.residues):
            lines.append(f"- N divided by {m} leaves remainder {r}")
        lines.append(
            f"N is the smallest positive number with all these remainders (so N < {product})."
        )
        lines.append("Give N as a plain integer inside \\boxed{...}, for example \\boxed{57}.")
        self.prompt = "\n".join(lines)
        return self.prompt, {"moduli": list(self.moduli), "turn": 0}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {"turn": self.turn}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        answer = first_boxed(action)
        if answer is None:
            text = "No answer found. Write your number inside \\boxed{...}, e.g. \\boxed{57}."
            return text, 0.0, False, truncated, {"turn": self.turn, "error": "no_box"}
        cleaned = answer.replace(",", "").replace(" ", "")
        if not re.fullmatch(r"-?\d+", cleaned):
            text = f"'{answer}' is not a whole number. Answer with digits only inside \\boxed{{...}}."
            return text, 0.0, False, truncated, {"turn": self.turn, "error": "not_integer"}
        guess = int(cleaned)
        if guess == self.target:
            self.done = True
            return f"Correct: N = {guess}.", 1.0, True, truncated, {"turn": self.turn, "correct": True}
        broken = [m for m, r in zip(self.moduli, self.residues) if guess % m != r]
        if broken:
            text = f"Incorrect: {guess} does not leave the stated remainder when divided by {broken[0]}."
        else:
            text = f"Incorrect: {guess} has the right remainders but is not the smallest positive such number."
        return text, 0.0, False, truncated, {"turn": self.turn, "correct": False}

    def solution(self):
        return str(self.target)

    def close(self):
        pass

"""Copy the row of digits, at least NEED of them right: reward 1, else 0 (docs/MECHANISM_CHECK.md)."""

import itertools
import random

ALPHABET = "1234"
SHOWN = 4
HELD_OUT = [r for r in map("".join, itertools.product(ALPHABET, repeat=SHOWN))
            if sum(i * int(d) for i, d in enumerate(r, 1)) % 8 == 0]


class CopySpan:
    def __init__(self, max_turns=1, split="train", need=None, instance=None, **kwargs):
        if split not in ("train", "heldout"):
            raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
        self.max_turns, self.split, self.instance = max_turns, split, instance
        self.need = NEED if need is None else need
        if self.need not in range(1, SHOWN + 1):
            raise ValueError(f"NEED must be 1 to {SHOWN}, got {self.need!r}")
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.row, self.done = "", False
        if self.instance is not None:
            self.row = HELD_OUT[self.instance % len(HELD_OUT)]
        while not self.row or (self.row in HELD_OUT) != (self.split == "heldout"):
            self.row = "".join(rng.choice(ALPHABET) for _ in range(SHOWN))
        return f"Copy the row, at least {self.need} digits right:\n{self.row}", {"need": self.need}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        right = sum(a == b for a, b in zip("".join(str(action).split()), self.row))
        won = right >= self.need
        return ("Correct." if won else f"{right} right; the row was {self.row}."), float(won), True, False, \
            {"need": self.need, "right": right}

    def solution(self):
        return self.row

    def close(self):
        pass


NEED = 3

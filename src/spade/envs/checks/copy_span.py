"""Copy a row of digits, with at least NEED of them right: the mechanism run's environment template (issue 39).

Single turn. The observation shows a row of SHOWN digits drawn from ALPHABET ("Copy the row, at least 2 digits
right:" and, on the next line, "4132"). The reply's first SHOWN characters (spaces removed) are compared with the row
position by position: the reply wins (reward 1.0) when at least NEED of them are right; otherwise it earns
POSITION_CREDIT (0.02) for each right one, so that the agent's updates see which digits it got right (as
symbol_copy's), yet a reply that wins nothing stays far below the designer's plateau band. Every difficulty asks for
the same reply, the whole row: a policy that copies each digit right with probability p wins with the chance that at
least NEED of SHOWN such digits are right, which rises with p at every NEED (a reply that ignores the row, p = 0.25:
0.68, 0.26, 0.05 and 0.004 for NEED 1 to 4). NEED is the difficulty, and whichever NEED the agent plays, its reward
counts every digit it copies.

Rows whose checksum (the sum of each digit times its position, 1-4) is a multiple of 8 are held out: 32 of the 256,
each digit 8 times in each position. Training (``split="train"``, the default) never shows one; the held-out
evaluation (the ``mechanism_heldout`` benchmark) opens the class with ``split="heldout"``, the difficulty ``need`` it
scores and ``instance`` i, which plays the i-th held-out row, so every checkpoint and every run plays the same rows.

The mechanism run's designer writes NEED. This file, cut just after the last ``NEED = `` (TEMPLATE_MARKERS), is
what ``designer.response_template: copy_span`` opens every design reply with: the design's own token
(``designer.max_new_tokens: 1``) ends the module. A reply that is not a number leaves a module that does not load,
which validation rejects like any broken design. As a complete file (NEED = 3) it is also a learning-check
environment (spade.envs.checks) for tests and for the format warm-up's prompts.
Not a paper environment; nothing draws it unless a config names it.
"""

import itertools
import random

ALPHABET = "1234"
SHOWN = 4
POSITION_CREDIT = 0.02


def held_out(row):
    return sum((i + 1) * int(d) for i, d in enumerate(row)) % 8 == 0


HELD_OUT = ["".join(r) for r in itertools.product(ALPHABET, repeat=SHOWN) if held_out(r)]


class CopySpan:
    def __init__(self, max_turns=1, split="train", need=None, instance=None, **kwargs):
        if split not in ("train", "heldout"):
            raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
        self.max_turns = max_turns
        self.split, self.need, self.instance = split, NEED if need is None else need, instance
        self.row = ""
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        if self.instance is not None:
            self.row = HELD_OUT[self.instance % len(HELD_OUT)]
        else:
            self.row = "".join(rng.choice(ALPHABET) for _ in range(SHOWN))
            while held_out(self.row) != (self.split == "heldout"):
                self.row = "".join(rng.choice(ALPHABET) for _ in range(SHOWN))
        self.done = False
        return f"Copy the row, at least {self.need} digits right:\n{self.row}", {"need": self.need}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        reply = "".join(str(action).split()).upper()
        right = sum(a == b for a, b in zip(reply, self.row))
        if right >= self.need:
            return "Correct.", 1.0, True, False, {"need": self.need, "right": right}
        return f"{right} digits right; the row was {self.row}.", POSITION_CREDIT * right, True, False, \
            {"need": self.need, "right": right}

    def solution(self):
        return self.row

    def close(self):
        pass


NEED = 3

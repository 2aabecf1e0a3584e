"""Copy the first LENGTH digits of a row: the mechanism run's environment template (issue 39).

Single turn. The observation shows a row of SHOWN digits drawn from ALPHABET ("Copy the first 3 digits:" and, on the
next line, "4132"); the reply wins (reward 1.0) when its first LENGTH characters (spaces removed) are the row's first
LENGTH digits; otherwise it earns POSITION_CREDIT (0.02) for each of its first LENGTH characters in its right place,
so that the agent's updates see which digits it got right (as symbol_copy's), yet a reply that wins nothing stays far
below the designer's plateau band. The row always has SHOWN digits at the end of the observation, so the reply's i-th
digit copies a digit at the same distance back whatever LENGTH is: one skill serves every difficulty, and a policy
that copies each digit right with probability p wins about p ** LENGTH of the time (a reply that ignores the row:
0.25 ** LENGTH). LENGTH is the difficulty.

The mechanism run's designer writes LENGTH. This file, cut just after the last ``LENGTH = `` (TEMPLATE_MARKERS), is
what ``designer.response_template: copy_span`` opens every design reply with: the design's own token
(``designer.max_new_tokens: 1``) ends the module. A reply that is not a number leaves a module that does not load,
which validation rejects like any broken design. As a complete file (LENGTH = 3) it is also a learning-check
environment (spade.envs.checks) for tests and for the format warm-up's prompts.
Not a paper environment; nothing draws it unless a config names it.
"""

import random

ALPHABET = "1234"
SHOWN = 4
POSITION_CREDIT = 0.02


class CopySpan:
    def __init__(self, max_turns=1, **kwargs):
        self.max_turns = max_turns
        self.row = ""
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.row = "".join(rng.choice(ALPHABET) for _ in range(SHOWN))
        self.done = False
        return f"Copy the first {LENGTH} digits:\n{self.row}", {"length": LENGTH}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        reply = "".join(str(action).split()).upper()
        right = sum(a == b for a, b in zip(reply[:LENGTH], self.row[:LENGTH]))
        if reply[:LENGTH] == self.row[:LENGTH]:
            return "Correct.", 1.0, True, False, {"length": LENGTH, "right": right}
        return f"{right} digits right; the answer was {self.row[:LENGTH]}.", POSITION_CREDIT * right, True, False, \
            {"length": LENGTH, "right": right}

    def solution(self):
        return self.row

    def close(self):
        pass


LENGTH = 3

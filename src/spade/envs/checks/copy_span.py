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

The mechanism run's designer writes NEED. This file, cut just after the last ``NEED = `` (TEMPLATE_MARKERS), is
what ``designer.response_template: copy_span`` opens every design reply with: the design's own token
(``designer.max_new_tokens: 1``) ends the module. A reply that is not a number leaves a module that does not load,
which validation rejects like any broken design. As a complete file (NEED = 3) it is also a learning-check
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
        return f"Copy the row, at least {NEED} digits right:\n{self.row}", {"need": NEED}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        reply = "".join(str(action).split()).upper()
        right = sum(a == b for a, b in zip(reply, self.row))
        if right >= NEED:
            return "Correct.", 1.0, True, False, {"need": NEED, "right": right}
        return f"{right} digits right; the row was {self.row}.", POSITION_CREDIT * right, True, False, \
            {"need": NEED, "right": right}

    def solution(self):
        return self.row

    def close(self):
        pass


NEED = 3

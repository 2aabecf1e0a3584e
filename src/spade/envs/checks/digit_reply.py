"""Reply with a number of a given length: the learning check's task (issue 16).

Single turn. The reward is the share of the first n characters of the reply (spaces removed) that are digits, so
a policy earns more the closer it comes to what was asked (at most 0.9 unless the reply is exactly n digits,
which wins with 1.0). A randomly initialised
model starts near 0 and a working policy-gradient trainer raises its return within a few dozen steps. It is not a
paper environment and nothing draws it unless a config names it (spade.envs.checks).
"""

import random


class DigitReply:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.length = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.length = rng.randint(4, 8)
        self.done = False
        text = f"Reply with a number of exactly {self.length} digits and nothing else."
        return text, {"length": self.length}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        reply = "".join(str(action).split())
        head = reply[: self.length]
        reward = sum(ch.isdigit() for ch in head) / self.length
        if len(reply) == self.length and reply.isdigit():
            return "Correct.", 1.0, True, False, {"digits": self.length}
        return f"{int(reward * self.length)} of the first {self.length} characters are digits.", min(reward, 0.9), \
            True, False, {"digits": int(reward * self.length)}

    def solution(self):
        return "7" * self.length

    def close(self):
        pass

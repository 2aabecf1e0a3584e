"""Reply with a number of a given length: the first learning check's task (issue 16), no longer the default's.

Single turn. The reward is the share of the first n characters of the reply (spaces removed) that are digits,
capped at 0.9 unless the reply is exactly n digits, which wins with 1.0. The reward barely depends on the prompt: any
reply of at least 8 digits earns 0.9 on every instance, so a rising return shows only that the trainer moves the
policy toward digits, not that the policy reads the observation (the tiny random model learned to emit 12 digits and
won no episode: issue 30). Its instances are not held out either: a seed picks n in 4..8, 5 prompts in all. The
default learning check uses ``symbol_copy`` instead; this file stays for runs that name it (the OpenRLHF integration
run). Not a paper environment; nothing draws it unless a config names it (spade.envs.checks).
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

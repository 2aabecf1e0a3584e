"""Copy two letters: the learning check's task (issue 30).

Single turn. The observation shows two letters of an 8-letter alphabet, written together at its end ("...: KD");
the correct reply is the same two letters in the same order (spaces and case ignored). An exact reply wins with
reward 1.0. A reply of exactly two letters of the alphabet that does not win earns POSITION_CREDIT (0.05) per
letter in its right place; any other reply earns 0 (so a longer reply, or one made of the tokenizer's merged letter
pairs such as "ck", gets nothing). The answer is a function of the observation: the best reply that ignores it
earns about 0.04 on average (tests/test_learning_check.py scores every constant reply over 1,000 instances of each
split). The reply length is the run's agent.max_new_tokens (2 in the learning check: one token per letter).

Instance spaces: a letter pair (i, j) (indices into ALPHABET) belongs to split 'train' when i + j is odd (32 pairs)
and to split 'heldout' when i + j is even (32 pairs). Training sees every letter at both positions, but never a
held-out pair, so a held-out win needs a reply that depends on what the observation shows. Seed s shows pair
s mod 32 of its split (so 1,000 consecutive seeds show every pair 31 or 32 times); the learning_check benchmark
opens the environment with split='heldout'.

The letters are ones the tiny model's tokenizer (spade.inference.models TINY_RANDOM) keeps as single tokens (it
merges " A", " E", " F", " M", " P" and " T", and no two capitals), so each letter of the observation is one token.
The learning check's base model first learns the reply format on random letter pairs drawn from ALPHABET
(spade.inference.format_warmup, model card tiny-random-copy), never on this task's answers.
Not a paper environment; nothing draws it unless a config names it (spade.envs.checks).
"""

import random

ALPHABET = "BCDGHJKL"
POSITION_CREDIT = 0.05  # reward per right letter of a two-letter reply that does not win
SPLITS = ("train", "heldout")


def split_pairs(split):
    """The letter pairs of one split, in a fixed order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    size = len(ALPHABET)
    return [ALPHABET[i] + ALPHABET[j] for i in range(size) for j in range(size)
            if ((i + j) % 2 == 0) == (split == "heldout")]


class SymbolCopy:
    def __init__(self, max_turns=20, split="train", **kwargs):
        self.pairs = split_pairs(split)
        self.split = split
        self.max_turns = max_turns
        self.answer = ""
        self.done = False
        self.reset()

    def reset(self, seed=None):
        if seed is None:
            self.answer = random.choice(self.pairs)
        else:
            self.answer = self.pairs[int(seed) % len(self.pairs)]
        self.done = False
        text = f"Reply with these two letters in the same order: {self.answer}"
        return text, {"split": self.split}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.done = True
        reply = "".join(str(action).split()).upper()
        if reply == self.answer:
            return "Correct.", 1.0, True, False, {"positions": 2}
        right = 0
        if len(reply) == len(self.answer) and all(letter in ALPHABET for letter in reply):
            right = sum(a == b for a, b in zip(reply, self.answer))
        return f"{right} of the 2 letters are right; the answer was {self.answer}.", POSITION_CREDIT * right, True, \
            False, {"positions": right}

    def solution(self):
        return " ".join(self.answer)

    def close(self):
        pass

"""Copy two letters: the learning check's task (issue 30).

Single turn. The observation shows two letters of a 16-letter alphabet, written together at its end ("...: KQ");
the correct reply is the same two letters in the same order (spaces and case ignored). An exact reply wins with
reward 1.0. Otherwise each of the reply's first two characters (spaces removed) earns POSITION_CREDIT (0.05) when it
is the letter shown at that position and LETTER_CREDIT (0.005) when it is another letter of the alphabet, so a reply
that does not win earns at most 0.1. The answer is a function of the observation: the best reply that ignores it
earns about 0.03 on average (tests/test_learning_check.py scores every constant reply over 1,000 instances of each
split). The tiny letter credit gives a random model's first groups some reward variance (most of its replies hold no
letter of the alphabet at all); the reply length is the run's agent.max_new_tokens (2 in the learning check: one
token per letter), so a win needs the two right letters and nothing else.

Instance spaces: a letter pair (i, j) (indices into ALPHABET) belongs to split 'train' when (i + j) % 3 != 0 (170
pairs) and to split 'heldout' when (i + j) % 3 == 0 (86 pairs). Training sees every letter at both positions, but
never a held-out pair, so a held-out win needs a reply that depends on what the observation shows. The seed picks
the pair within the split; the learning_check benchmark opens the environment with split='heldout'.

The letters are those the tiny model's tokenizer (spade.inference.models TINY_RANDOM) keeps as single tokens (it
merges " A", " E", " F", " M", " P" and " T", and no two capitals), so each letter of the observation is one token.
Not a paper environment; nothing draws it unless a config names it (spade.envs.checks).
"""

import random

ALPHABET = "BCDGHJKLNQRSVWXZ"
POSITION_CREDIT = 0.05  # reward per right position of a reply that does not win
LETTER_CREDIT = 0.005  # reward per position that holds some other letter of ALPHABET (a first signal for a random
# model: most of its replies hold no letter of the alphabet; tiny, so a constant reply still earns under 0.05)
SPLITS = ("train", "heldout")


def split_pairs(split):
    """The letter pairs of one split, in a fixed order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    size = len(ALPHABET)
    return [ALPHABET[i] + ALPHABET[j] for i in range(size) for j in range(size)
            if ((i + j) % 3 == 0) == (split == "heldout")]


class SymbolCopy:
    def __init__(self, max_turns=20, split="train", **kwargs):
        self.pairs = split_pairs(split)
        self.split = split
        self.max_turns = max_turns
        self.answer = ""
        self.done = False
        self.reset()

    def reset(self, seed=None):
        self.answer = random.Random(seed).choice(self.pairs)
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
        right = sum(a == b for a, b in zip(reply, self.answer))
        letters = sum(a != b and a in ALPHABET for a, b in zip(reply, self.answer))
        reward = POSITION_CREDIT * right + LETTER_CREDIT * letters
        return f"{right} of the 2 letters are right; the answer was {self.answer}.", reward, True, False, \
            {"positions": right}

    def solution(self):
        return " ".join(self.answer)

    def close(self):
        pass

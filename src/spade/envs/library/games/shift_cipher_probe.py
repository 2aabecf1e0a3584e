"""Break a repeating-key shift cipher by encrypting short probe words, then decode a secret word.

Interactive with hidden state: the key (a short repeating list of letter shifts) is hidden; each probe
shows at most four encrypted letters, so the agent must spot the period. The final reward is the
share of letters of the secret word decoded correctly.
"""

import random
import re
import string

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
WORDS = [
    "planet", "garden", "silver", "button", "window", "rocket", "castle", "forest", "marble",
    "lantern", "harbor", "meadow", "orange", "pepper", "shadow", "turtle", "violin", "wizard",
    "blanket", "compass", "dolphin", "feather", "journey", "kingdom", "mystery", "pilgrim",
]
ALPHABET = string.ascii_lowercase
PROBE_LIMIT = 4


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


def shift_word(word, key, direction=1):
    letters = []
    for i, ch in enumerate(word):
        letters.append(ALPHABET[(ALPHABET.index(ch) + direction * key[i % len(key)]) % 26])
    return "".join(letters)


class ShiftCipherProbe:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.key = []
        self.secret = ""
        self.cipher = ""
        self.probes_left = 0
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.key = [rng.randint(1, 25) for _ in range(rng.choice([2, 3]))]
        while len(set(self.key)) == 1:
            self.key = [rng.randint(1, 25) for _ in range(len(self.key))]
        self.secret = rng.choice(WORDS)
        self.cipher = shift_word(self.secret, self.key)
        self.probes_left = 3
        self.turn = 0
        self.done = False
        text = (
            f"A secret lowercase word was encrypted to '{self.cipher}'. The cipher shifts each letter forward "
            "in the alphabet (wrapping z -> a) by an amount taken from a hidden key; the key is a short list of "
            "shifts (length 2 or 3) that repeats along the word, starting again from its first shift for every word.\n"
            "Commands, one per turn inside \\boxed{...}:\n"
            f"- \\boxed{{encrypt abc}} shows how a word of at most {PROBE_LIMIT} lowercase letters is encrypted "
            f"({self.probes_left} probes available).\n"
            "- \\boxed{decode yourword} submits the plaintext and ends the game; your score is the share of letters "
            "in the right position (extra letters count as wrong)."
        )
        return text, {"cipher": self.cipher, "probes_left": self.probes_left}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        info = {"turn": self.turn, "probes_left": self.probes_left}
        status = f" Probes left: {self.probes_left}. Ciphertext: '{self.cipher}'."
        content = first_boxed(action)
        if content is None:
            return "No command found. Use \\boxed{encrypt ...} or \\boxed{decode ...}." + status, 0.0, False, truncated, info
        words = content.lower().split()
        if len(words) != 2 or words[0] not in ("encrypt", "decode") or not all(c in ALPHABET for c in words[1]):
            return f"Could not read '{content}'. Use encrypt <letters> or decode <letters>." + status, 0.0, False, truncated, info
        command, word = words
        if command == "encrypt":
            if self.probes_left <= 0:
                return "No probes left; submit a decode." + status, 0.0, False, truncated, info
            if len(word) > PROBE_LIMIT:
                return f"Probe words may have at most {PROBE_LIMIT} letters." + status, 0.0, False, truncated, info
            self.probes_left -= 1
            info["probes_left"] = self.probes_left
            status = f" Probes left: {self.probes_left}. Ciphertext: '{self.cipher}'."
            return f"'{word}' encrypts to '{shift_word(word, self.key)}'." + status, 0.0, False, truncated, info
        right = sum(1 for a, b in zip(word, self.secret) if a == b)
        self.done = True
        info["correct_letters"] = right
        reward = right / max(len(self.secret), len(word))
        return f"{right} of {len(self.secret)} letters correct. The word was '{self.secret}'.", reward, True, truncated, info

    def solution(self):
        if self.done:
            return ""
        lines = ["encrypt aaaa"] if self.probes_left > 0 else []
        lines.append("decode " + self.secret)
        return "\n".join(lines)

    def close(self):
        pass

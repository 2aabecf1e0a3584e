"""Knights always tell the truth, knaves always lie: work out who is who.

Single-turn puzzle with a unique solution (checked by brute force over every assignment).
"""

import itertools
import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
LEVELS = ("standard", "easy")  # easy: 2 inhabitants instead of 3-5 (a tier a very small model sometimes wins)
NAME_POOL = ["Ada", "Bram", "Cleo", "Dario", "Esme", "Farid", "Greta", "Hugo"]


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


def holds(claim, world):
    """Truth value of a claim under ``world`` (a tuple of booleans, True = knight)."""
    kind = claim[0]
    if kind == "knight":
        return world[claim[1]]
    if kind == "knave":
        return not world[claim[1]]
    if kind == "same":
        return world[claim[1]] == world[claim[2]]
    if kind == "differ":
        return world[claim[1]] != world[claim[2]]
    if kind == "count":
        return sum(world) == claim[1]
    if kind == "implies":
        return (not world[claim[1]]) or world[claim[2]]
    return (not world[claim[1]]) or (not world[claim[2]])  # "notboth"


def describe(claim, names, speaker):
    """The claim in words, as said by ``speaker`` (who refers to themself as I)."""

    def who(i):
        return "I" if i == speaker else names[i]

    def be(i):
        return "am" if i == speaker else "is"

    kind = claim[0]
    if kind in ("knight", "knave"):
        return f"{names[claim[1]]} is a {kind}."
    if kind == "count":
        return f"Exactly {claim[1]} of us {'is a knight' if claim[1] == 1 else 'are knights'}."
    a, b = claim[1], claim[2]
    if kind == "implies":
        return f"If {who(a)} {be(a)} a knight, then {who(b)} {be(b)} a knight."
    if a == speaker:
        a, b = b, a
    pair = f"{who(a)} and {who(b)}"
    if kind == "same":
        return f"{pair} are of the same kind."
    if kind == "differ":
        return f"{pair} are of different kinds."
    return f"{pair} are not both knights."


class KnightsKnavesPuzzle:
    def __init__(self, max_turns=20, level="standard", **kwargs):
        self.max_turns = max_turns
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.names = []
        self.world = ()
        self.statements = []
        self.turn = 0
        self.done = False
        self.reset()

    def _random_claim(self, rng, speaker, size):
        others = [i for i in range(size) if i != speaker]
        kind = rng.choice(["knight", "knave", "same", "differ", "count", "implies", "notboth"])
        if kind in ("knight", "knave"):
            return (kind, rng.choice(others))
        if kind == "count":
            return (kind, rng.randint(0, size))
        a, b = rng.sample(range(size), 2)
        return (kind, a, b)

    def _consistent_worlds(self, size):
        found = []
        for world in itertools.product([True, False], repeat=size):
            if all(holds(claim, world) == world[speaker] for speaker, claim in self.statements):
                found.append(world)
        return found

    def reset(self, seed=None):
        rng = random.Random(seed)
        size = 2 if self.level == "easy" else rng.choice([3, 4, 4, 5])
        self.names = rng.sample(NAME_POOL, size)
        while True:
            self.world = tuple(rng.random() < 0.5 for _ in range(size))
            self.statements = []
            for speaker in range(size):
                claim = self._random_claim(rng, speaker, size)
                while holds(claim, self.world) != self.world[speaker]:
                    claim = self._random_claim(rng, speaker, size)
                self.statements.append((speaker, claim))
            if len(self._consistent_worlds(size)) == 1:
                break
        self.turn = 0
        self.done = False
        lines = ["On this island every inhabitant is a knight (always tells the truth) or a knave (always lies)."]
        lines.append(f"You meet {size} inhabitants: {', '.join(self.names)}.")
        for speaker, claim in self.statements:
            lines.append(f"{self.names[speaker]} says: \"{describe(claim, self.names, speaker)}\"")
        lines.append(
            "Decide who is a knight (K) and who is a knave (N). Answer with one letter per inhabitant in the order "
            f"they were listed, separated by spaces: \\boxed{{{' '.join(['X'] * size)}}} where each X is K or N."
        )
        return "\n".join(lines), {"inhabitants": list(self.names)}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        answer = first_boxed(action)
        if answer is None:
            return "No answer found. Put the K/N letters inside \\boxed{...}.", 0.0, False, truncated, {"turn": self.turn}
        letters = [c for c in answer.upper() if c.isalpha()]
        if len(letters) != len(self.names) or any(c not in "KN" for c in letters):
            text = f"Give exactly {len(self.names)} letters, each K or N, e.g. K N K."
            return text, 0.0, False, truncated, {"turn": self.turn}
        if all((c == "K") == knight for c, knight in zip(letters, self.world)):
            self.done = True
            return "Correct! Everyone is identified.", 1.0, True, truncated, {"turn": self.turn}
        return "That assignment contradicts the statements. Try again.", 0.0, False, truncated, {"turn": self.turn}

    def solution(self):
        return " ".join("K" if knight else "N" for knight in self.world)

    def close(self):
        pass

"""Deduce a hidden object's attributes from a small budget of yes/no membership questions.

Interactive with hidden state: each question asks whether one attribute lies in a set of values.
The final reward is the share of attributes declared correctly.
"""

import math
import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
ATTRIBUTES = {
    "colour": ["red", "blue", "green", "yellow", "purple"],
    "shape": ["circle", "square", "triangle", "star", "hexagon"],
    "material": ["wood", "metal", "glass", "stone", "clay"],
    "size": ["tiny", "small", "medium", "large", "huge"],
    "pattern": ["plain", "striped", "dotted", "checked", "waved"],
}


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


class SecretProfileProbe:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.options = {}
        self.secret = {}
        self.questions_left = 0
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        chosen = sorted(rng.sample(sorted(ATTRIBUTES), 4), key=list(ATTRIBUTES).index)
        self.options = {}
        for name in chosen:
            count = rng.choice([3, 4, 4, 5])
            self.options[name] = sorted(rng.sample(ATTRIBUTES[name], count))
        self.secret = {name: rng.choice(values) for name, values in self.options.items()}
        needed = sum(math.ceil(math.log2(len(values))) for values in self.options.values())
        self.questions_left = needed + 1
        self.turn = 0
        self.done = False
        lines = ["A hidden object has exactly one value for each of these attributes:"]
        for name, values in self.options.items():
            lines.append(f"- {name}: one of {', '.join(values)}")
        first = chosen[0]
        pair = " ".join(self.options[first][:2])
        lines.append("Commands (one per turn, inside \\boxed{...}):")
        lines.append(
            f"- \\boxed{{ask {first} {pair}}} answers yes if the object's {first} is one of the listed values, otherwise no."
        )
        lines.append(
            "- \\boxed{declare v1 v2 v3 v4} gives one value per attribute, in the order listed above, and ends the game."
        )
        lines.append(
            f"You may ask {self.questions_left} questions. Your score is the share of attributes you declare correctly."
        )
        return "\n".join(lines), {"attributes": chosen, "questions_left": self.questions_left}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        info = {"turn": self.turn, "questions_left": self.questions_left}
        status = f" Questions left: {self.questions_left}."
        content = first_boxed(action)
        if content is None:
            return "No command found. Use \\boxed{ask ...} or \\boxed{declare ...}." + status, 0.0, False, truncated, info
        words = content.lower().replace(",", " ").split()
        if not words or words[0] not in ("ask", "declare"):
            return f"Unknown command '{content}'. Use ask or declare." + status, 0.0, False, truncated, info
        if words[0] == "ask":
            if self.questions_left <= 0:
                return "No questions left; declare your answer." + status, 0.0, False, truncated, info
            if len(words) < 3 or words[1] not in self.options:
                return "Ask as: ask <attribute> <value> [<value> ...]." + status, 0.0, False, truncated, info
            name, values = words[1], words[2:]
            unknown = [v for v in values if v not in self.options[name]]
            if unknown:
                return f"'{unknown[0]}' is not a possible {name}." + status, 0.0, False, truncated, info
            self.questions_left -= 1
            reply = "yes" if self.secret[name] in values else "no"
            info["questions_left"] = self.questions_left
            text = f"Is the {name} one of {', '.join(values)}? {reply.upper()}. Questions left: {self.questions_left}."
            return text, 0.0, False, truncated, info
        guesses = words[1:]
        names = list(self.options)
        if len(guesses) != len(names):
            return f"Declare exactly {len(names)} values, one per attribute." + status, 0.0, False, truncated, info
        right = sum(1 for name, guess in zip(names, guesses) if self.secret[name] == guess)
        self.done = True
        info["correct"] = right
        truth = ", ".join(f"{name}={self.secret[name]}" for name in names)
        return f"{right} of {len(names)} attributes correct. The object was: {truth}.", right / len(names), True, truncated, info

    def solution(self):
        if self.done:
            return ""
        lines = []
        budget = self.questions_left
        for name, values in self.options.items():
            candidates = list(values)
            while len(candidates) > 1 and budget > 0:
                half = candidates[: len(candidates) // 2]
                lines.append(f"ask {name} " + " ".join(half))
                budget -= 1
                candidates = half if self.secret[name] in half else candidates[len(half):]
        lines.append("declare " + " ".join(self.secret[name] for name in self.options))
        return "\n".join(lines)

    def close(self):
        pass

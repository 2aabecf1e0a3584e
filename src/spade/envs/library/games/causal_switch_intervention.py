"""Discover the hidden wiring between relays by intervening on them, then declare every direct link.

Interactive with hidden state: relays follow a known order and each unclamped relay turns on when any
of its direct causes is on. The final reward is the overlap (Jaccard index) between the declared and
the true set of direct links.
"""

import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
NAMES = "ABCDE"


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


class CausalSwitchIntervention:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.names = ""
        self.edges = []
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.names = NAMES[: rng.choice([4, 5])]
        pairs = [(a, b) for i, a in enumerate(self.names) for b in self.names[i + 1:]]
        while True:
            self.edges = [pair for pair in pairs if rng.random() < 0.4]
            if 2 <= len(self.edges) <= 6:
                break
        self.turn = 0
        self.done = False
        order = " -> ".join(self.names)
        text = (
            f"Relays {', '.join(self.names)} are wired by hidden direct links that only point forward in the order "
            f"{order} (a link X>Y means X directly drives Y). An unclamped relay is ON (1) exactly when at least "
            "one relay linked into it is ON; a relay with no incoming link is OFF (0) unless you clamp it.\n"
            "Commands, one per turn inside \\boxed{...}:\n"
            f"- \\boxed{{intervene {self.names[0]}=1 {self.names[2]}=0}} clamps the listed relays to the given values "
            "and shows the resulting state of every relay.\n"
            "- \\boxed{declare A>B B>D} lists every direct link you believe exists (or \\boxed{declare none}) and "
            "ends the game. Reward = |declared and true links| / |declared or true links|."
        )
        return text, {"relays": list(self.names)}

    def _settle(self, clamps):
        values = {}
        for name in self.names:
            if name in clamps:
                values[name] = clamps[name]
            else:
                values[name] = 1 if any(values[a] == 1 for a, b in self.edges if b == name) else 0
        return values

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        info = {"turn": self.turn}
        content = first_boxed(action)
        words = content.upper().replace(",", " ").split() if content is not None else []
        if not words or words[0] not in ("INTERVENE", "DECLARE"):
            return "Use \\boxed{intervene X=1 ...} or \\boxed{declare X>Y ...}.", 0.0, False, truncated, info
        if words[0] == "INTERVENE":
            clamps = {}
            for token in words[1:]:
                match = re.fullmatch(r"([A-E])=([01])", token)
                if not match or match.group(1) not in self.names:
                    return f"Could not read clamp '{token}'; write e.g. {self.names[0]}=1.", 0.0, False, truncated, info
                clamps[match.group(1)] = int(match.group(2))
            if not clamps:
                return "Clamp at least one relay, e.g. intervene A=1.", 0.0, False, truncated, info
            values = self._settle(clamps)
            shown = " ".join(f"{n}={values[n]}" for n in self.names)
            return f"With {' '.join(words[1:])} clamped: {shown}.", 0.0, False, truncated, info
        declared = set()
        if words[1:] != ["NONE"]:
            for token in words[1:]:
                match = re.fullmatch(r"([A-E])>([A-E])", token)
                if not match or match.group(1) not in self.names or match.group(2) not in self.names:
                    return f"Could not read link '{token}'; write links like A>B.", 0.0, False, truncated, info
                declared.add((match.group(1), match.group(2)))
        truth = set(self.edges)
        union = declared | truth
        reward = len(declared & truth) / len(union) if union else 1.0
        self.done = True
        info["correct_links"] = len(declared & truth)
        listed = " ".join(f"{a}>{b}" for a, b in self.edges)
        return f"The true links were: {listed}.", reward, True, truncated, info

    def solution(self):
        if self.done:
            return ""
        lines = []
        for index, cause in enumerate(self.names):
            for effect in self.names[index + 1:]:
                others = [f"{n}=0" for n in self.names if n not in (cause, effect)]
                lines.append("intervene " + " ".join([f"{cause}=1"] + others))
        lines.append("declare " + " ".join(f"{a}>{b}" for a, b in self.edges))
        return "\n".join(lines)

    def close(self):
        pass

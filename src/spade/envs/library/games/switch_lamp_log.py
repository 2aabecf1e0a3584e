"""Infer from a log of experiments which switch drives each lamp, and whether through an inverter.

Single-turn puzzle: the log always pins down one wiring per lamp.
"""

import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
LEVELS = ("standard", "easy")  # easy: 2 switches and 1 lamp instead of 4-5 and 3-4 (a tier a very small model sometimes wins)


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


def lamp_state(row, wiring):
    switch, inverted = wiring
    return row[switch] != inverted


class SwitchLampLog:
    def __init__(self, max_turns=20, level="standard", **kwargs):
        self.max_turns = max_turns
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.switches = 0
        self.wiring = []
        self.rows = []
        self.turn = 0
        self.done = False
        self.reset()

    def _consistent(self, lamp):
        options = []
        for switch in range(self.switches):
            for inverted in (False, True):
                if all(lamp_state(row, (switch, inverted)) == lit[lamp] for row, lit in self.rows):
                    options.append((switch, inverted))
        return options

    def reset(self, seed=None):
        rng = random.Random(seed)
        easy = self.level == "easy"
        self.switches = 2 if easy else rng.choice([4, 5])
        lamps = 1 if easy else rng.choice([3, 4])
        self.wiring = [(rng.randrange(self.switches), rng.random() < 0.4) for _ in range(lamps)]
        while True:
            self.rows = []
            for _ in range(rng.randint(2, 3) if easy else rng.randint(4, 6)):
                row = [rng.random() < 0.5 for _ in range(self.switches)]
                self.rows.append((row, [lamp_state(row, w) for w in self.wiring]))
            if all(len(self._consistent(lamp)) == 1 for lamp in range(lamps)):
                break
        self.turn = 0
        self.done = False
        lines = [
            f"A panel has switches S1-S{self.switches} and lamps L1-L{lamps}. Each lamp is wired to exactly one switch, "
            "either directly (lit when that switch is ON) or through an inverter (lit when that switch is OFF). "
            "Log of experiments (1 = ON/lit, 0 = OFF/dark):"
        ]
        header = " ".join(f"S{i + 1}" for i in range(self.switches)) + " | " + " ".join(f"L{j + 1}" for j in range(lamps))
        lines.append(header)
        for number, (row, lit) in enumerate(self.rows, start=1):
            cells = "  ".join(str(int(v)) for v in row) + "  |  " + "  ".join(str(int(v)) for v in lit)
            lines.append(f"{cells}   (experiment {number})")
        lines.append(
            "For each lamp in order, name its switch, with ~ in front for an inverter. "
            "Example answer format for three lamps: \\boxed{S2 ~S1 S2}."
        )
        return "\n".join(lines), {"switches": self.switches, "lamps": lamps}

    def _read(self, answer):
        tokens = answer.upper().replace("NOT ", "~").replace("!", "~").replace(",", " ").split()
        parsed = []
        for token in tokens:
            match = re.fullmatch(r"(~?)S(\d)", token)
            if not match or not 1 <= int(match.group(2)) <= self.switches:
                return None
            parsed.append((int(match.group(2)) - 1, match.group(1) == "~"))
        return parsed

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        answer = first_boxed(action)
        if answer is None:
            return "No answer found. Write e.g. \\boxed{S2 ~S1 S2}.", 0.0, False, truncated, {"turn": self.turn}
        parsed = self._read(answer)
        if parsed is None or len(parsed) != len(self.wiring):
            return f"Give exactly {len(self.wiring)} entries like S3 or ~S3.", 0.0, False, truncated, {"turn": self.turn}
        if parsed == self.wiring:
            self.done = True
            return "Correct wiring!", 1.0, True, truncated, {"turn": self.turn}
        return "That wiring does not match every experiment in the log. Try again.", 0.0, False, truncated, {"turn": self.turn}

    def solution(self):
        return " ".join(("~" if inverted else "") + f"S{switch + 1}" for switch, inverted in self.wiring)

    def close(self):
        pass

"""Locate buried treasures on a grid by scanning distances and digging a few holes.

Interactive with hidden state: a scan reports the Manhattan distance to the nearest treasure
still buried; digs are scarce. The final reward is the share of treasures recovered.
"""

import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
SIZE = 7


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


class TreasureDistanceScan:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.treasures = []
        self.found = []
        self.dug = []
        self.digs_left = 0
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        cells = [(x, y) for y in range(SIZE) for x in range(SIZE)]
        count = rng.choice([2, 3, 3])
        self.treasures = sorted(rng.sample(cells, count))
        self.found = []
        self.dug = []
        self.digs_left = count + 2
        self.turn = 0
        self.done = False
        text = (
            f"{count} treasures are buried on a {SIZE}x{SIZE} grid (x = column 0-{SIZE - 1} from the left, "
            f"y = row 0-{SIZE - 1} from the top), at most one per cell.\n"
            "Commands, one per turn inside \\boxed{...}:\n"
            "- \\boxed{scan x y} reports the Manhattan distance |dx|+|dy| from cell (x, y) to the nearest treasure "
            "that is still buried (scans are free but cost a turn).\n"
            f"- \\boxed{{dig x y}} digs cell (x, y). You have {self.digs_left} digs.\n"
            "- \\boxed{stop} ends the game early.\n"
            "The game ends when every treasure is found or the digs run out; your score is the share of treasures found."
        )
        return text, {"treasures": count, "digs_left": self.digs_left}

    def _score(self):
        return len(self.found) / len(self.treasures)

    def _status(self):
        return (
            f" Found {len(self.found)}/{len(self.treasures)}, digs left {self.digs_left}, "
            f"turn {self.turn}/{self.max_turns}."
        )

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        info = {"turn": self.turn, "found": len(self.found), "digs_left": self.digs_left}
        content = first_boxed(action)
        if content is None:
            return "No command found. Use \\boxed{scan x y}, \\boxed{dig x y} or \\boxed{stop}." + self._status(), 0.0, False, truncated, info
        words = content.lower().replace(",", " ").split()
        if words == ["stop"]:
            self.done = True
            return "You stopped searching." + self._status(), self._score(), True, truncated, info
        if len(words) != 3 or words[0] not in ("scan", "dig") or not all(w.isdigit() for w in words[1:]):
            return f"Could not read '{content}'. Use scan x y, dig x y or stop." + self._status(), 0.0, False, truncated, info
        x, y = int(words[1]), int(words[2])
        if not (0 <= x < SIZE and 0 <= y < SIZE):
            return f"({x}, {y}) is off the grid." + self._status(), 0.0, False, truncated, info
        buried = [t for t in self.treasures if t not in self.found]
        if words[0] == "scan":
            distance = min(abs(tx - x) + abs(ty - y) for tx, ty in buried)
            return f"Scan at ({x}, {y}): nearest buried treasure is {distance} steps away." + self._status(), 0.0, False, truncated, info
        if (x, y) in self.dug:
            return f"You already dug ({x}, {y})." + self._status(), 0.0, False, truncated, info
        self.dug.append((x, y))
        self.digs_left -= 1
        if (x, y) in buried:
            self.found.append((x, y))
            text = f"You dug at ({x}, {y}) and found a treasure!"
        else:
            text = f"You dug at ({x}, {y}): nothing here."
        info.update({"found": len(self.found), "digs_left": self.digs_left})
        if len(self.found) == len(self.treasures) or self.digs_left <= 0:
            self.done = True
            return text + " Game over." + self._status(), self._score(), True, truncated, info
        return text + self._status(), 0.0, False, truncated, info

    def solution(self):
        if self.done:
            return ""
        lines = []
        for tx, ty in self.treasures:
            if (tx, ty) not in self.found:
                lines.append(f"dig {tx} {ty}")
        return "\n".join(lines)

    def close(self):
        pass

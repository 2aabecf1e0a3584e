"""Steer a robot through a walled grid with relative commands (forward / turn left / turn right).

Multi-turn game: the agent must track the robot's heading, so every move is a small mental rotation.
"""

import collections
import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
HEADINGS = ["north", "east", "south", "west"]
DELTAS = {"north": (0, -1), "east": (1, 0), "south": (0, 1), "west": (-1, 0)}
ARROWS = {"north": "^", "east": ">", "south": "v", "west": "<"}
SIZE = 7


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


def advance(walls, x, y, heading, command):
    """The robot's next (x, y, heading) after one command; a blocked move leaves it in place."""
    index = HEADINGS.index(heading)
    if command == "left":
        return x, y, HEADINGS[(index - 1) % 4]
    if command == "right":
        return x, y, HEADINGS[(index + 1) % 4]
    dx, dy = DELTAS[heading]
    nx, ny = x + dx, y + dy
    if 0 <= nx < SIZE and 0 <= ny < SIZE and (nx, ny) not in walls:
        return nx, ny, heading
    return x, y, heading


def shortest_plan(walls, start, goal):
    queue = collections.deque([start])
    parent = {start: None}
    while queue:
        state = queue.popleft()
        if (state[0], state[1]) == goal:
            plan = []
            while parent[state] is not None:
                state, command = parent[state]
                plan.append(command)
            return plan[::-1]
        for command in ("forward", "left", "right"):
            nxt = advance(walls, state[0], state[1], state[2], command)
            if nxt not in parent:
                parent[nxt] = (state, command)
                queue.append(nxt)
    return None


class RotatingRobotMaze:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.walls = set()
        self.robot = (0, 0, "north")
        self.goal = (0, 0)
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        cells = [(x, y) for y in range(SIZE) for x in range(SIZE)]
        while True:
            self.walls = set(rng.sample(cells, rng.randint(9, 14)))
            free = [c for c in cells if c not in self.walls]
            start, self.goal = rng.sample(free, 2)
            self.robot = (start[0], start[1], rng.choice(HEADINGS))
            plan = shortest_plan(self.walls, self.robot, self.goal)
            if plan is not None and 8 <= len(plan) <= max(8, min(15, self.max_turns - 1)):
                break
        self.turn = 0
        self.done = False
        intro = (
            "A robot ('^', '>', 'v', '<' shows where it faces; north is up) must reach the goal G on this map.\n"
            "'#' is a wall, '.' is open floor. Commands, one per turn inside \\boxed{...}:\n"
            "\\boxed{forward} moves one cell in the facing direction (a wall or the edge blocks it),\n"
            "\\boxed{left} and \\boxed{right} turn the robot 90 degrees in place.\n"
        )
        return intro + self._render(), {"goal": list(self.goal)}

    def _render(self):
        x0, y0, heading = self.robot
        rows = []
        for y in range(SIZE):
            row = ""
            for x in range(SIZE):
                if (x, y) == (x0, y0):
                    row += ARROWS[heading]
                elif (x, y) == self.goal:
                    row += "G"
                elif (x, y) in self.walls:
                    row += "#"
                else:
                    row += "."
            rows.append(row)
        status = f"Robot at column {x0}, row {y0}, facing {heading}. Turn {self.turn}/{self.max_turns}."
        return "\n".join(rows) + "\n" + status

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        command = first_boxed(action)
        command = command.lower() if command is not None else None
        if command not in ("forward", "left", "right"):
            text = "Unknown command. Use \\boxed{forward}, \\boxed{left} or \\boxed{right}.\n" + self._render()
            return text, 0.0, False, truncated, {"turn": self.turn, "valid": False}
        before = self.robot
        self.robot = advance(self.walls, before[0], before[1], before[2], command)
        note = "Bump! The way is blocked.\n" if command == "forward" and self.robot == before else ""
        if (self.robot[0], self.robot[1]) == self.goal:
            self.done = True
            return "The robot reached the goal!\n" + self._render(), 1.0, True, truncated, {"turn": self.turn}
        return note + self._render(), 0.0, False, truncated, {"turn": self.turn, "valid": True}

    def solution(self):
        plan = shortest_plan(self.walls, self.robot, self.goal)
        return "\n".join(plan or [])

    def close(self):
        pass

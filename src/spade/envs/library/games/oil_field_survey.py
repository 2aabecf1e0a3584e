"""Choose which oil plots to drill under a budget when yields are only roughly known.

Interactive with hidden state: each plot shows a drilling cost and a yield range; a few surveys
reveal exact yields. Drilling ends the game with reward = yield obtained / best achievable yield.
"""

import itertools
import random
import re

BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")
PLOTS = "ABCDEFG"


def first_boxed(action):
    match = BOXED_RE.search(str(action))
    return match.group(1).strip() if match else None


class OilFieldSurvey:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.costs = []
        self.yields = []
        self.ranges = []
        self.budget = 0
        self.surveyed = {}
        self.surveys_left = 0
        self.best_yield = 0
        self.best_plan = []
        self.turn = 0
        self.done = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        count = rng.choice([6, 7])
        self.costs = [rng.randint(1, 5) for _ in range(count)]
        self.yields = [rng.randint(5, 40) for _ in range(count)]
        self.ranges = []
        for value in self.yields:
            low = max(0, value - rng.randint(0, 10))
            self.ranges.append((low, low + 10))
        self.budget = max(5, sum(self.costs) * rng.randint(35, 50) // 100)
        self.best_yield, self.best_plan = 0, []
        for size in range(1, count + 1):
            for combo in itertools.combinations(range(count), size):
                if sum(self.costs[i] for i in combo) <= self.budget:
                    total = sum(self.yields[i] for i in combo)
                    if total > self.best_yield:
                        self.best_yield, self.best_plan = total, list(combo)
        self.surveyed = {}
        self.surveys_left = 3
        self.turn = 0
        self.done = False
        lines = [f"You may drill oil plots whose total drilling cost is at most {self.budget}. Plots:"]
        for i in range(count):
            low, high = self.ranges[i]
            lines.append(f"- plot {PLOTS[i]}: cost {self.costs[i]}, yield somewhere from {low} to {high}")
        lines.append("Commands, one per turn inside \\boxed{...}:")
        lines.append(f"- \\boxed{{survey B}} reveals the exact yield of one plot ({self.surveys_left} surveys).")
        lines.append(
            "- \\boxed{drill A C} drills the listed plots and ends the game; "
            "reward = your total yield / the best total yield possible within the budget (0 if over budget)."
        )
        return "\n".join(lines), {"plots": count, "budget": self.budget}

    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        if truncated:
            self.done = True
        info = {"turn": self.turn, "surveys_left": self.surveys_left}
        content = first_boxed(action)
        words = content.upper().replace(",", " ").split() if content is not None else []
        labels = PLOTS[: len(self.costs)]
        if len(words) < 2 or words[0] not in ("SURVEY", "DRILL"):
            return "Use \\boxed{survey X} or \\boxed{drill X Y ...} with plot letters.", 0.0, False, truncated, info
        picks = words[1:]
        if any(p not in labels for p in picks) or len(set(picks)) != len(picks):
            return f"Plots are {', '.join(labels)}; list each at most once.", 0.0, False, truncated, info
        if words[0] == "SURVEY":
            if len(picks) != 1:
                return "Survey one plot at a time.", 0.0, False, truncated, info
            if self.surveys_left <= 0:
                return "No surveys left; choose plots to drill.", 0.0, False, truncated, info
            index = labels.index(picks[0])
            self.surveys_left -= 1
            self.surveyed[picks[0]] = self.yields[index]
            info["surveys_left"] = self.surveys_left
            return f"Survey: plot {picks[0]} yields exactly {self.yields[index]}. Surveys left: {self.surveys_left}.", 0.0, False, truncated, info
        chosen = [labels.index(p) for p in picks]
        cost = sum(self.costs[i] for i in chosen)
        self.done = True
        if cost > self.budget:
            return f"Over budget: cost {cost} > {self.budget}. Nothing is drilled.", 0.0, True, truncated, info
        total = sum(self.yields[i] for i in chosen)
        info["yield"] = total
        text = f"You drilled {' '.join(picks)} for a total yield of {total}; the best possible was {self.best_yield}."
        return text, total / self.best_yield, True, truncated, info

    def solution(self):
        if self.done:
            return ""
        lines = []
        budget = self.surveys_left
        for i in self.best_plan:
            if budget > 0 and PLOTS[i] not in self.surveyed:
                lines.append(f"survey {PLOTS[i]}")
                budget -= 1
        lines.append("drill " + " ".join(PLOTS[i] for i in self.best_plan))
        return "\n".join(lines)

    def close(self):
        pass

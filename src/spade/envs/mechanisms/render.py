"""Render a solved mechanism instance as a normal game environment source file for our runtime.

The file is self-contained (standard library ``re`` only): the parameters, ``u*``, ``u0`` and the
optimal action lines are literals, and the family's ``utility``/``advance`` functions are copied in.
Three presentations of the same parameters (``PRESENTATIONS``): ``agentic`` (hidden values shown as ranges,
``inspect`` reveals them), ``written`` (every parameter in the first observation, still played turn by
turn; VHD-Play's "informed") and ``written_out`` (every parameter shown, one turn: the reply's first
``\\boxed{...}`` holds the whole decision list, commands separated by ``;``, played in order and scored at
once). In the stateful presentations actions are text commands inside ``\\boxed{...}``:

- ``inspect X [Y ...]`` reveals hidden parameters (each target spends one probe where a budget applies);
- the family's decision commands (``take``, ``order``, ``run``, ``open``, ``produce``, ``accept``/``reject``);
- ``finish`` ends the episode, scoring what was committed (uncommitted decisions count as doing nothing).

The episode terminates when the decision process is complete or on ``finish``; only the terminal step
carries a reward, ``clip((u - u0) / (u* - u0), 0, 1)``, with ``utility``, ``u_star``, ``u_default`` and
``score`` in its info. Reaching ``max_turns`` first truncates with reward 0. The instance is fixed by the
file: ``reset(seed)`` restores the same instance for every seed (variety comes from rendering several
sampler seeds).
"""

from __future__ import annotations

import inspect
import textwrap

from spade.envs.mechanisms.base import PRESENTATIONS, MechanismInstance, get_family

_TEMPLATE = '''"""{doc}"""

import re

FAMILY = {family!r}
PRESENTATION = {presentation!r}
PARAMS = {params!r}
REVEALS = {reveals!r}
PROBE_BUDGET = {budget!r}
U_STAR = {u_star!r}
U_ZERO = {u0!r}
OPTIMAL_ACTIONS = {optimal!r}
INTRO = {intro!r}
BOXED_RE = re.compile(r"\\\\boxed\\{{([^{{}}]*)\\}}")
COMMANDS_HELP = {commands!r}


{functions}


class {class_name}:
    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.reset()

    def reset(self, seed=None):
        # One fixed instance per file: the seed does not change the parameters.
        self.decisions = []
        self.revealed = []
        self.probes_left = PROBE_BUDGET
        self.turn = 0
        self.done = False
        return INTRO, {{"family": FAMILY, "presentation": PRESENTATION, "probes_left": self.probes_left}}

    def _info(self):
        return {{"turn": self.turn, "committed": len(self.decisions), "probes_left": self.probes_left}}

    def _finish(self, text, truncated):
        self.done = True
        u = float(utility(PARAMS, self.decisions))
        score = min(1.0, max(0.0, (u - U_ZERO) / (U_STAR - U_ZERO)))
        info = self._info()
        info.update({{"utility": u, "u_star": U_STAR, "u_default": U_ZERO, "score": score}})
        text = text + " Episode over: your utility is " + str(round(u, 6)) + ", the optimum is " + str(round(U_STAR, 6)) + "."
        return text, score, True, truncated, info

    def _inspect(self, targets):
        if not targets:
            return "Name what to inspect, e.g. \\\\boxed{{inspect " + (sorted(REVEALS)[0] if REVEALS else "X") + "}}."
        unknown = [t for t in targets if t not in REVEALS]
        if unknown:
            return "Nothing to inspect under " + ", ".join(unknown) + ". Targets: " + (", ".join(sorted(REVEALS)) or "none") + "."
        lines = []
        for target in targets:
            if target in self.revealed:
                lines.append(REVEALS[target])
                continue
            if self.probes_left is not None and self.probes_left <= 0:
                lines.append("No probes left; " + target + " stays hidden.")
                continue
            if self.probes_left is not None:
                self.probes_left -= 1
            self.revealed.append(target)
            lines.append(REVEALS[target])
        if self.probes_left is not None:
            lines.append("Probes left: " + str(self.probes_left) + ".")
        return " ".join(lines)

{step_methods}

    def close(self):
        pass
'''


_STATEFUL_STEP = '''    def step(self, action):
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        truncated = self.turn >= self.max_turns
        match = BOXED_RE.search(str(action))
        words = match.group(1).strip().lower().replace(",", " ").split() if match else []
        if not words:
            text = "Write one command inside \\\\boxed{...}. " + COMMANDS_HELP
        elif words[0] == "finish":
            return self._finish("You finished.", truncated)
        elif words[0] == "inspect":
            text = self._inspect([w.upper() for w in words[1:]])
        else:
            ok, text, complete = advance(PARAMS, self.decisions, words)
            if ok and complete:
                return self._finish(text, truncated)
            if not ok:
                text = text + " " + COMMANDS_HELP
        if truncated:
            self.done = True
            return text + " Turn limit reached; nothing is scored.", 0.0, False, True, self._info()
        return text, 0.0, False, False, self._info()

    def solution(self):
        if self.done:
            return ""
        return "\\n".join(OPTIMAL_ACTIONS[len(self.decisions):])'''


_WRITTEN_OUT_STEP = '''    def step(self, action):
        # Written-out presentation: a single turn whose first \\boxed{...} holds the whole decision list.
        if self.done:
            return "The episode is over.", 0.0, True, False, {}
        self.turn += 1
        match = BOXED_RE.search(str(action))
        body = match.group(1) if match else ""
        plan = [part.strip().lower().replace(",", " ").split() for part in re.split(r"[;\\n]", body)]
        plan = [words for words in plan if words]
        if not plan:
            return self._finish("No plan found: write every decision inside one \\\\boxed{...}, separated by ';'. "
                                "Nothing was committed.", False)
        notes = []
        for index, words in enumerate(plan):
            if words[0] == "finish":
                notes.append("Command " + str(index + 1) + " is 'finish': the plan stops there.")
                break
            ok, text, complete = advance(PARAMS, self.decisions, words)
            if not ok:
                notes.append("Command " + str(index + 1) + " (" + " ".join(words) + ") is not allowed: " + text
                             + " The plan stops there.")
                break
            notes.append(text)
            if complete:
                if index + 1 < len(plan):
                    notes.append("The decisions are complete; the " + str(len(plan) - index - 1)
                                 + " command(s) after that were ignored.")
                break
        return self._finish(" ".join(notes), False)

    def solution(self):
        if self.done:
            return ""
        return "; ".join(OPTIMAL_ACTIONS)'''

# How a written-out plan is spelled, per family (the decision commands in play order); a family missing here
# gets its commands_help line.
WRITTEN_OUT_PLAN = {
    "knapsack": "one 'take X Y' per period, in period order ('take none' for a period in which you take nothing)",
    "inventory": "one 'order Q' per period, in period order",
    "scheduling": "one 'run X' per job, in the order the jobs are to run",
    "tardiness": "one 'run X' per job, in the order the jobs are to run",
    "facility": "a single 'open X Y ...' naming every site to open",
    "lp": "a single 'produce X1 X2 ...' with one whole-number quantity per product",
    "stopping": "'reject' for every offer you pass on, then 'accept' for the offer you sell to",
}
_PER_TURN = "One command per turn"  # where every family's intro starts its per-turn instructions


def written_out_intro(family, params: dict) -> str:
    """The first observation of the written-out presentation: the family's written intro (every parameter
    shown) without its per-turn instructions, followed by the single-reply plan instructions."""
    lines = family.intro(params, "written", None).split("\n")
    cut = lines[-1].find(_PER_TURN)
    if cut >= 0:
        kept = lines[-1][:cut].strip()
        lines = lines[:-1] + ([kept] if kept else [])
    plan = WRITTEN_OUT_PLAN.get(family.name, family.commands_help)
    lines.append("Submit your whole plan now, in a single reply: put all your decisions inside one \\boxed{...}, "
                 "separated by ';', for example \\boxed{first command; second command}. Write " + plan + ". The plan "
                 "is played once, in order, and then scored; a command that is not allowed stops it there, and "
                 "decisions left out count as doing nothing.")
    return "\n".join(lines)


def class_name(family: str) -> str:
    return "".join(part.capitalize() for part in family.split("_")) + "Mechanism"


def render(instance: MechanismInstance, presentation: str = "agentic") -> str:
    """The environment source file of ``instance`` in ``presentation`` ('agentic', 'written' or 'written_out')."""
    if presentation not in PRESENTATIONS:
        raise ValueError(f"unknown presentation {presentation!r}; allowed: {list(PRESENTATIONS)}")
    family = get_family(instance.family)
    params = instance.params
    budget = family.probe_budget(params) if presentation == "agentic" else None
    functions = "\n\n\n".join(textwrap.dedent(inspect.getsource(f)).strip() for f in family.env_functions)
    doc = (f"{family.title} (mechanism family {family.name!r}, {presentation} presentation).\n\n"
           f"Sampler seed {instance.seed} (attempt {instance.attempt}), parameters hash {instance.params_hash}.\n"
           f"Reference solver: {family.solver}. Reward = clip((u - u0) / (u* - u0), 0, 1) on the terminal step.")
    if presentation == "written_out":
        intro, step_methods = written_out_intro(family, params), _WRITTEN_OUT_STEP
    else:
        intro, step_methods = family.intro(params, presentation, budget), _STATEFUL_STEP
    return _TEMPLATE.format(
        doc=doc, family=family.name, presentation=presentation, params=params, reveals=family.reveals(params),
        budget=budget, u_star=instance.u_star, u0=instance.u0, optimal=list(instance.optimal_actions),
        intro=intro, commands=family.commands_help, functions=functions, class_name=class_name(family.name),
        step_methods=step_methods,
    )

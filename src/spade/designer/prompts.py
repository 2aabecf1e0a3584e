"""Prompt builders of the two roles (spec sections 1-3): the environment designer and the reasoning agent.

Every builder returns chat messages, a list of ``{"role": ..., "content": ...}`` dicts. The text is
kept short and concrete because small and large policies read the same prompts.

- ``design_prompt``: ask for one environment of a given flavour and skill, optionally grounded on a
  corpus document and shown memory seeds (good examples and one to avoid; ``memory.examples``: by default,
  as in the reference code, the good examples' code cut to 2,000 characters under a win-rate/regret header
  and the one to avoid named only).
- ``hint_prompt`` / ``extract_hint``: ask for, and clean, the privileged hint written from the code.
- ``screen_prompt`` / ``screen_verdict``: ask the policy whether a tool-use environment's success criteria can be
  met, and read its verdict (the tool-use LLM screen, ``validation.llm_screen``).
- ``agent_system_prompt`` / ``with_hint``: the agent's instructions and the hint injected into the
  first observation.
"""

from __future__ import annotations

import json
import re

from spade.designer.skills import SKILLS, get_domain, get_skill, get_variant
from spade.envs.intake import IntakeError, find_env_class, strip_think

__all__ = [
    "DEFAULT_HINT_CHARS",
    "DESIGN_FLAVOURS",
    "HINT_CLOSE",
    "HINT_OPEN",
    "MEMORY_EXAMPLE_STYLES",
    "agent_system_prompt",
    "agent_prompt",
    "design_prompt",
    "example_name",
    "extract_hint",
    "flavour_kind",
    "hint_prompt",
    "screen_prompt",
    "screen_verdict",
    "with_hint",
]

DESIGN_FLAVOURS = ("puzzle", "game", "interactive", "tool_use")
DEFAULT_HINT_CHARS = 800
HINT_OPEN, HINT_CLOSE = "<hint>", "</hint>"
HINT_MARK_START = "=== HINT (privileged help for this episode) ==="
HINT_MARK_END = "=== END OF HINT ==="


def flavour_kind(flavour: str) -> str:
    """``"tool_use"`` for the tool-use flavour, ``"game"`` for the three game flavours."""
    if flavour not in DESIGN_FLAVOURS:
        raise ValueError(f"unknown flavour {flavour!r}; expected one of {DESIGN_FLAVOURS}")
    return "tool_use" if flavour == "tool_use" else "game"


def _messages(system: str, user: str) -> list[dict]:
    return [{"role": "system", "content": system.strip()}, {"role": "user", "content": user.strip()}]


# ---------------------------------------------------------------------------------------------------
# designer: environment
# ---------------------------------------------------------------------------------------------------
DESIGNER_SYSTEM = """\
You are an environment designer. You write training environments for a reasoning agent as Python code.
The agent never sees your code: it only reads the text observations and sends text actions.
Reply with exactly ONE ```python fenced block holding the complete module, and nothing after it."""

def _unwrap(text: str) -> str:
    """Join lines continued with a trailing backslash (the templates below are raw strings)."""
    return text.replace("\\\n", "").strip()


_COMMON_RULES = _unwrap(r"""
General rules:
- One self-contained module. Standard library only (for example math, random, re, json, itertools, \
collections, string). No third-party packages.
- No print(), no input(), no file, network or process access, no global mutable state.
""")
_GAME_RULES = _unwrap(r"""
- Determinism: draw everything random from a private generator, self.rng = random.Random(seed), \
created in reset(); never the module-level random functions, time or hash(). The same seed must give \
the same task and the same observations.
- Observations are plain text and fully describe what the agent may see: the rules, the goal, the \
current state, feedback on the last action and the exact action format with an example. Never put \
the answer or the hidden values in an observation or in info.
""")
_TOOL_RULES = _unwrap(r"""
- The ToolUseBaseEnv import above is the only import from outside the standard library.
- Determinism: draw everything random from the rng passed to _setup; never the module-level random \
functions, time or hash(). The same seed must give the same task and the same outputs.
- The instructions and tool outputs are all the agent sees: together they must fully describe what \
it needs, without revealing the reference solution.
""")

_GAME_CONTRACT = _unwrap(r"""
The module defines exactly one class with these methods and return types:
- __init__(self, max_turns=20, **kwargs): store max_turns, set every attribute, then call self.reset().
- reset(self, seed=None) -> tuple[str, dict]: start a new task drawn from random.Random(seed); reset the \
turn counter; return (observation, info).
- step(self, action: str) -> tuple[str, float, bool, bool, dict]: return (observation, reward, \
terminated, truncated, info) on EVERY code path, including empty, malformed or repeated actions \
(answer those with a helpful observation and reward 0.0, never an exception).
- solution(self) -> str: the reference actions that win from the CURRENT state, one per line, each \
a bare answer without \boxed{}. Used for checking only, never shown to the agent.
- close(self): release nothing, just return.

Actions: the agent writes its action inside \boxed{...}; step() reads the FIRST \boxed{...} span, for \
example with re.search(r"\\boxed\{([^{}]*)\}", action). Every valid answer is a short brace-free \
string (no { or }). Accept harmless variations (spaces, letter case) where sensible.

Rewards and episode end:
- reward is a float in [0, 1]; 1.0 means full success and only full success earns 1.0.
- terminated = True when the goal is reached (or the episode is definitely lost).
- truncated = True when the number of step() calls reaches max_turns.
- the reward returned on the final step is the episode's score.
""")

_FLAVOUR_RULES = {
    "puzzle": r"""
Flavour: single-turn puzzle.
- reset() states one self-contained task whose answer is checked exactly.
- A correct answer gives reward 1.0 and terminated = True. A wrong answer gives reward 0.0, a short \
feedback observation that does not reveal the answer, and the agent may try again until max_turns \
(then truncated = True).
- solution() returns one line: the correct answer.""",
    "game": r"""
Flavour: multi-turn game.
- The state changes with every action, and the agent faces real choices: on most turns several moves \
are legal and some of them lead to worse positions or dead ends.
- A good player wins in about 10-15 turns; the episode allows at most 20 turns (max_turns=20).
- Each observation shows the current state and the legal moves or the action format.
- Win: reward 1.0, terminated = True. Loss or dead end: terminated = True with reward 0.0 or a partial \
score below 1.0. Ordinary moves give 0.0.
- solution() lists the winning moves from the current state, one per line, so that sending them in \
order wins.""",
    "interactive": r"""
Flavour: interactive environment with hidden state, grounded in a concept.
- Build it around one concrete concept, rule or procedure (a formula, a mechanism, a classification, \
an algorithm) from the document when one is given, and name that concept in the module docstring.
- The task has hidden state (hidden parameters, values or rules). The agent reveals it step by step \
with probing actions (queries, measurements, experiments) whose results appear in the observation, \
then commits a final answer with a distinct action (for example \boxed{answer: ...}). Limit the \
number of probes so that reasoning, not brute force, is needed.
- Do not print the governing formula or rule; the agent must infer it.
- The final answer gives partial reward in [0, 1] for partly correct answers and 1.0 only when fully \
correct; then terminated = True. Probes give 0.0.
- solution() lists the actions, one per line, ending with the final answer, that earn 1.0 from the \
current state.""",
}

_TOOL_CONTRACT = _unwrap(r"""
The module defines exactly one class, a subclass of ToolUseBaseEnv. Start with:
    from spade.envs.tool_base import ToolUseBaseEnv, DECLINE_TOOL
The base class already implements reset(), step(), get_tools(), close(), argument checking, error \
reporting, revealing instructions one at a time and the reward. Do NOT override reset, step, \
get_tools or _advance_if_done. You write:
- _tools (class attribute): {tool_name: {"description": str, "parameters": {arg: {"type": \
"string"|"integer"|"number"|"boolean"|"array"|"object", "description": str, "enum": [...] (optional)}}, \
"required": [arg, ...]}}.
- one method tool_<tool_name>(self, **arguments) per tool. It returns a JSON-able value (dict, list or \
str). For a bad request (unknown id, invalid value, not allowed) raise an exception with a clear \
message; the base class turns it into an error text for the agent.
- _setup(self, rng): build the whole task from rng (a random.Random that reset(seed) passes in). Set \
self.state (a dict holding all records), self._user_messages (the instructions, revealed one at a \
time) and self._message_criteria (one function state -> bool per instruction, True once that \
instruction has been carried out in self.state).
- solution(self) -> str: the reference actions from the CURRENT state, one per line: one JSON tool \
call per line, {"name": ..., "arguments": {...}}, for the instructions not yet completed (from \
self._current_msg on), then a last line <answer>done</answer>. Never shown to the agent.

Requirements:
- 3-8 task tools, deterministic (same state and arguments, same result), at least one with an enum or \
a required parameter; plus 1-2 distractor tools that look plausible but are never needed.
- 3-5 instructions. Each is one atomic request written as the user would say it and takes several \
calls to complete (about 4-8, mixing reads and writes); keep the whole reference solution under 25 \
calls.
- Every criterion must be False on a freshly reset state (for every seed), must become True only \
through the agent's tool calls, and must follow from the instruction text and tool outputs alone.
- The agent sees only the instructions, the tool schemas and the tool outputs; every id or value it \
needs must be stated in an instruction or obtainable through a tool.
- The agent earns reward 1 only when it answers <answer>done</answer> after every instruction's \
criterion has passed; you do not compute rewards yourself.
""")

_DECLINE_NOTE = _unwrap(r"""
For the out-of-scope instruction, add "decline_request": DECLINE_TOOL to _tools (the base class \
provides tool_decline_request, which appends the reason to state["declined"]); its criterion is \
lambda s: len(s.get("declined", [])) > 0.
""")


MEMORY_EXAMPLE_STYLES = ("reference", "full")  # memory.examples
DEFAULT_EXAMPLE_CHARS = 2000  # memory.example_chars: the reference's code_snippet_max_chars (env_memory.py:41-47)


def _example_fields(example) -> tuple:
    """(code, skill, win rate, regret, env id) of a memory example: a ``MemoryRecord`` (or anything with those
    attributes), or a bare code string whose statistics are unknown."""
    if isinstance(example, str):
        return example, None, None, None, ""
    return (example.code, getattr(example, "skill", None), getattr(example, "win_rate", None),
            getattr(example, "regret", None), getattr(example, "env_id", ""))


def _stat(value, what: str) -> str:
    return f"{what} {value:.2f}" if value is not None else f"{what} not measured"


def example_name(code: str, fallback: str = "") -> str:
    """The name a negative example is shown by: its environment class (as intake finds it), else the first class
    the code defines, else ``fallback``."""
    try:
        return find_env_class(code)[0]
    except IntakeError:
        found = re.search(r"^class\s+(\w+)", code, re.M)
        return found.group(1) if found else fallback


def _positive_text(index: int, example, style: str, max_chars: int) -> str:
    code, skill, win_rate, regret, _ = _example_fields(example)
    code = code.strip()
    if style == "full":
        return (f"Good example {index}: an earlier environment at the right difficulty (the agent won it "
                f"sometimes, not always). Learn from its quality; do not copy its task.\n"
                f"<good_example>\n{code}\n</good_example>")
    # reference style (env_memory.py:125-135, orchestrator.py:1213-1222): the measured numbers in a header line and
    # the code cut to its first max_chars characters
    header = ", ".join(part for part in (
        f"skill: {get_skill(skill).name}" if skill in SKILLS else "", _stat(win_rate, "agent win rate"),
        _stat(regret, "hint regret")) if part)
    cut = len(code) > max_chars
    shown = "its first {} characters".format(max_chars) if cut else "its code"
    return (f"Good example {index} ({header}): an earlier environment whose difficulty suited the agent, "
            f"{shown} below. Take its structure and difficulty as a guide and write a different task.\n"
            f"<good_example>\n{code[:max_chars].rstrip() if cut else code}\n</good_example>")


def _negative_text(example, style: str) -> str:
    code, _, win_rate, _, env_id = _example_fields(example)
    if style == "full":
        return ("Example to avoid: the agent won this earlier environment almost always or almost never "
                "(too easy or too hard). Do not make one like it.\n"
                f"<bad_example>\n{code.strip()}\n</bad_example>")
    # reference style (env_memory.py:137-151): named only, with why it failed; no code
    name = example_name(code, env_id or "an earlier environment")
    if win_rate is None:
        why = "too easy or too hard for the agent"
    else:
        why = f"too {'easy' if win_rate > 0.5 else 'hard'} (agent win rate {win_rate:.2f})"
    return f"Example to avoid: the earlier environment {name} was {why}. Do not make one like it."


def _seed_section(positive_seeds, negative_seed, style: str = "reference",
                  max_chars: int = DEFAULT_EXAMPLE_CHARS) -> str:
    """The memory examples of a design prompt (``memory.examples``): 'reference' shows each positive with a
    skill / win-rate / regret header and its code cut to ``max_chars`` characters, and names the negative
    without its code; 'full' shows the whole code of both."""
    if style not in MEMORY_EXAMPLE_STYLES:
        raise ValueError(f"memory.examples must be one of {MEMORY_EXAMPLE_STYLES}, got {style!r}")
    if max_chars < 1:
        raise ValueError(f"memory.example_chars must be positive, got {max_chars!r}")
    parts = [_positive_text(i, example, style, max_chars) for i, example in enumerate(positive_seeds or [], start=1)]
    if negative_seed:
        parts.append(_negative_text(negative_seed, style))
    return "\n\n".join(parts)


def design_prompt(
    flavour: str,
    skill: str,
    document: str | None,
    positive_seeds: list[str] | None,
    negative_seed: str | None,
    domain: str | None = None,
    variant: str | None = None,
    examples: str = "reference",
    example_chars: int = DEFAULT_EXAMPLE_CHARS,
) -> list[dict]:
    """Chat messages asking the designer for one environment.

    ``flavour``: "puzzle", "game", "interactive" or "tool_use". ``skill``: a game skill for the game
    flavours, a tool-use skill for "tool_use". ``document``: grounding text (already truncated) or
    None. ``positive_seeds``: good earlier environments; ``negative_seed``: one to avoid; each a
    ``MemoryRecord`` or a bare code string (statistics unknown). ``domain``/``variant`` (tool use only): ids
    from ``spade.designer.skills``; a missing variant means "execute", a missing domain leaves the choice to
    the designer. ``examples``/``example_chars``: how the memory examples are shown (``memory.examples``,
    ``_seed_section``).
    """
    kind = flavour_kind(flavour)
    info = get_skill(skill)
    if info.kind != kind:
        raise ValueError(f"skill {skill!r} is a {info.kind} skill; it cannot be used with flavour {flavour!r}")
    if kind == "game" and (domain is not None or variant is not None):
        raise ValueError("domain and variant apply to the tool_use flavour only")

    sections = [f"Target skill: {info.name}. {info.description}"]
    if kind == "game":
        sections += [_unwrap(_FLAVOUR_RULES[flavour]), _GAME_CONTRACT, _COMMON_RULES + "\n" + _GAME_RULES]
    else:
        chosen = get_variant(variant or "execute")
        if domain is None:
            sections.append("Application domain: choose a realistic one (for example retail, banking or travel).")
        else:
            dom = get_domain(domain)
            sections.append(f"Application domain: {dom.name}. {dom.description}")
        variant_text = f"Task variant: {chosen.id}. {chosen.description}"
        if chosen.id == "with_irrelevant":
            variant_text += "\n" + _DECLINE_NOTE
        sections += ["Flavour: multi-turn tool use.", variant_text, _TOOL_CONTRACT, _COMMON_RULES + "\n" + _TOOL_RULES]

    if document:
        if kind == "game":
            ground = "Build the environment around one concrete concept from this document."
        else:
            ground = ("Build the environment around one concept from this document (an operation, a data "
                      "structure, a rule), adapted to the application domain.")
        sections.append(f"{ground}\n<document>\n{document.strip()}\n</document>")
    elif flavour == "interactive":
        sections.append("No document is given: choose the concept yourself from mathematics or science.")
    seeds = _seed_section(positive_seeds, negative_seed, examples, example_chars)
    if seeds:
        sections.append(seeds)
    sections.append(
        "Make the task challenging but fair: solvable by careful reasoning, not by guessing. "
        "Output exactly ONE ```python fenced block with the whole module and nothing after it."
    )
    return _messages(DESIGNER_SYSTEM, "\n\n".join(sections))


# ---------------------------------------------------------------------------------------------------
# designer: hint
# ---------------------------------------------------------------------------------------------------
HINT_SYSTEM = """\
You help a player who will play an environment without seeing its code. You read the code and write \
one short hint that makes success more likely without giving the answer away."""


def hint_prompt(code: str, flavour: str) -> list[dict]:
    """Chat messages asking for one privileged hint, written from the environment's source code."""
    kind = flavour_kind(flavour)
    if kind == "tool_use":
        task = (
            "Write a value-free plan: 2-5 short numbered steps saying which tools to call in which order "
            "for each kind of instruction, what to look up first, and how to finish "
            "(<answer>done</answer>). Do not include ids, names, amounts or other concrete values; "
            "they change with every episode."
        )
    else:
        task = (
            "Write 2-4 sentences: the key insight or strategy that solves the task, and the exact answer "
            "format inside \\boxed{...}. Never state the answer or any hidden value; the task changes "
            "with every seed."
        )
    user = (
        f"Environment code:\n```python\n{code.strip()}\n```\n\n{task}\n"
        f"Put the hint inside {HINT_OPEN}...{HINT_CLOSE}."
    )
    return _messages(HINT_SYSTEM, user)


_HINT_BLOCK = re.compile(r"<hint>(.*?)</hint>", re.S | re.I)
_HINT_OPEN = re.compile(r"<hint>", re.I)


def _strip_think(text: str) -> str:
    """Reasoning removed as intake does it, except that an unclosed block ends at a ``<hint>`` tag."""
    return strip_think(text, resume=_HINT_OPEN)[0]


def extract_hint(text: str, max_chars: int = DEFAULT_HINT_CHARS) -> str:
    """The hint in a designer reply: reasoning removed, the first ``<hint>...</hint>`` body if present
    (an unclosed ``<hint>`` runs to the end), else the whole reply; trimmed and cut to ``max_chars``
    (at a word boundary when one exists in the last fifth)."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    text = _strip_think(text or "")
    block = _HINT_BLOCK.search(text)
    if block:
        text = block.group(1)
    else:
        opener = _HINT_OPEN.search(text)
        if opener:
            text = text[opener.end():]
    text = text.strip()
    if len(text) > max_chars:
        cut = text[:max_chars]
        space = cut.rfind(" ")
        text = (cut[:space] if space >= max_chars * 4 // 5 else cut).rstrip()
    return text


# ---------------------------------------------------------------------------------------------------
# designer: the tool-use screen (paper: the policy checks each success criterion; reference code:
# spade/core/env_validator.py, tool-use prompt and verdict, called from spade/core/orchestrator.py:1157-1176)
# ---------------------------------------------------------------------------------------------------
SCREEN_SYSTEM = """\
You audit tool-use environments written for an assistant agent. Your only question is whether the task can \
be completed at all. A hard task is fine; an impossible one is not."""

_SCREEN_TASK = _unwrap(r"""
Each instruction in self._user_messages is completed when its criterion in self._message_criteria (a \
function of self.state) returns True. Go through the criteria one by one and check three things:
1. Reachable: some sequence of the tool calls the agent can make (the tool_<name> methods) puts \
self.state into the shape the criterion tests. Compare the exact keys, values and types: a criterion \
that looks for a value no tool ever writes, compares a string with a number, or tests membership in a \
list of dicts can never pass.
2. Not done at the start: the criterion is False on the state that _setup builds, before any tool call.
3. Derivable: every specific value the criterion needs (an id, a name, an amount, a date) is either \
stated in an instruction or returned by some tool, so the agent can find it instead of guessing. Values \
drawn at random are fine as long as a tool reports them.
Do not object to difficulty, long call sequences, distractor tools or wording. Name any criterion that \
fails a check. End your reply with \boxed{yes} if every criterion passes all three checks, or \boxed{no} \
otherwise.
""")


def screen_prompt(code: str) -> list[dict]:
    """Chat messages asking the policy whether every success criterion of the tool-use environment ``code`` is
    reachable, not already met after reset, and derivable from the instructions and tool outputs."""
    user = f"Environment code:\n```python\n{code.strip()}\n```\n\n{_SCREEN_TASK}"
    return _messages(SCREEN_SYSTEM, user)


SCREEN_VERDICTS = ("pass", "reject", "empty", "garbage")
SCREEN_YES = ("yes", "y", "true")  # the reference's accepted spellings (env_validator.py:180)
_BOXED_OPEN = re.compile(r"\\boxed\s*\{")
_LATEX_WRAP = re.compile(r"\\(?:text|textbf|mathrm)\s*\{([^{}]*)\}")


def _last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` of ``text`` (balanced braces); None when there is none."""
    content = None
    for found in _BOXED_OPEN.finditer(text):
        depth, start = 1, found.end()
        for index in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[index], 0)
            if depth == 0:
                content = text[start:index]
                break
    return content


def screen_verdict(text: str) -> str:
    """One of ``SCREEN_VERDICTS`` for a screen reply: 'empty' (nothing left once reasoning is removed as intake
    removes it; a reply cut inside its reasoning is empty), 'garbage' (no complete ``\\boxed{...}``, or an empty
    one), 'pass' (the last box, where the prompt asks for the verdict, says yes, y or true, in any case; a \\text{}
    wrapper is read through) or 'reject' (it says anything else, as the reference reads a box; the reference reads
    the first box of the whole reply)."""
    answer = strip_think(text or "")[0].strip()
    if not answer:
        return "empty"
    boxed = _last_boxed(answer)
    if boxed is None:
        return "garbage"
    word = _LATEX_WRAP.sub(r"\1", boxed).strip().strip(".!").strip().lower()
    if not word:
        return "garbage"
    return "pass" if word in SCREEN_YES else "reject"


# ---------------------------------------------------------------------------------------------------
# reasoning agent
# ---------------------------------------------------------------------------------------------------
_AGENT_GAME = r"""
You are playing a text environment over several turns. Each message from the user is an observation.
Every turn: think step by step, then give exactly one action inside \boxed{...}, for example \boxed{42}.
Only the first \boxed{...} of your reply counts, so write it once, at the end. Follow the answer format
the observation asks for."""

_AGENT_TOOLS = """
You are an assistant that serves a user's requests by calling tools, one call per turn.
Every turn: think briefly, then write exactly one tool call as JSON:
{"name": "<tool name>", "arguments": {<argument>: <value>, ...}}
Tool results and new instructions arrive as the next message. Use read tools to find ids you are not
given. If no tool can serve a request, call decline_request with a reason when that tool exists.
When every request has been handled, reply <answer>done</answer> instead of a tool call."""


def agent_system_prompt(kind: str, tools: list | None = None) -> str:
    """System prompt of the reasoning agent. ``kind``: "game" (or a game flavour) or "tool_use" (used by
    ``agent.tool_format: text`` only; the native format has no system prompt, spade.core.tool_calls).
    ``tools``: optional OpenAI tool schemas (``get_tools()``) to list in the prompt."""
    if kind in ("game", "games", "puzzle", "interactive"):
        return _AGENT_GAME.strip()
    if kind != "tool_use":
        raise ValueError(f"unknown agent kind {kind!r}; expected 'game' or 'tool_use'")
    text = _AGENT_TOOLS.strip()
    if tools:
        listed = "\n".join(json.dumps(tool, sort_keys=True) for tool in tools)
        text += f"\n\nAvailable tools:\n{listed}"
    return text


AGENT_PROMPT_STYLES = ("paper", "demonstration", "bare")
# one worked exchange in the answer format of a game, shown before the first observation with style 'demonstration'
_GAME_DEMONSTRATION = (
    "What is 7 + 5? Give the number inside \\boxed{...}, for example \\boxed{3}.",
    "7 + 5 = 12. \\boxed{12}",
)


def agent_prompt(kind: str, style: str = "paper") -> list:
    """The messages an episode starts with, before its first observation: the system prompt, and with ``style``
    'demonstration' (ours, for very small models that ignore the format instruction) one worked exchange in the
    games' \\boxed{} format. Tool use has no demonstration: its format is a tool call. With ``style`` 'bare' (ours, the
    learning check's tiny random model, which reads no instruction) there are none: the episode starts with its
    observation."""
    if style not in AGENT_PROMPT_STYLES:
        raise ValueError(f"agent.prompt_style must be one of {AGENT_PROMPT_STYLES}, got {style!r}")
    if style == "bare":
        return []
    messages = [{"role": "system", "content": agent_system_prompt(kind)}]
    if style == "demonstration" and kind != "tool_use":
        question, answer = _GAME_DEMONSTRATION
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return messages


def with_hint(observation: str, hint: str) -> str:
    """The first observation with the hint appended in a clearly marked block (unchanged if the hint
    is empty)."""
    hint = (hint or "").strip()
    if not hint:
        return observation
    return f"{observation}\n\n{HINT_MARK_START}\n{hint}\n{HINT_MARK_END}"


"""``ToolUseBaseEnv``: the base class of every tool-use environment (spec section 2).

Standard library only: this module is imported *inside the sandbox* by generated tool-use
environments (``from spade.envs.tool_base import ToolUseBaseEnv``; the name is also injected into
the module's globals, so code that uses it without importing still loads).

A subclass declares its tools and builds one task per ``reset``:

- ``_tools``: ``{name: {"description": str, "parameters": {arg: {"type": ..., "description": ...,
  "enum": [...]}}, "required": [arg, ...]}}``. Each tool ``name`` is served by a method
  ``tool_<name>(self, **arguments)`` whose return value (any JSON-able value) becomes the tool output.
- ``_setup(self, rng)``: draw the task from ``rng`` (a ``random.Random`` seeded by ``reset``) and set
  ``self.state`` (dict), ``self._user_messages`` (3-5 instructions, revealed one at a time) and
  ``self._message_criteria`` (one callable ``state -> bool`` per message).
- ``solution(self)``: the reference actions, one per line (tool-call JSON lines, then
  ``<answer>done</answer>``).

Each ``step()`` takes one OpenAI-style call, ``{"name": ..., "arguments": {...}}`` (optionally inside
``<tool_call>...</tool_call>``; ``arguments`` may also be a JSON string): the agent's reply (``agent.tool_format:
text``, one call per turn) or one of its calls (``native``: every call of a reply, one step each, see
spade.core.tool_calls). The agent finishes with
``<answer>done</answer>``. Tool errors come back as text and never raise. Reward is 1 only when the
agent answers ``done`` after every instruction's criterion has passed.
"""

from __future__ import annotations

import json
import random
import re

ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
TOOL_CALL_TAG_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}
STEP_COMPLETE = "[Step complete. Next instruction: {message}]"
ALL_COMPLETE = "[All steps complete. Submit <answer>done</answer>.]"
DECLINE_TOOL = {
    "description": "Decline a request that none of the available tools can serve.",
    "parameters": {"reason": {"type": "string", "description": "Why the request cannot be served."}},
    "required": ["reason"],
}


def parse_tool_call(action: str):
    """Return ``(name, arguments)`` from an agent action, or raise ``ValueError`` with a reason."""
    text = action.strip()
    tagged = TOOL_CALL_TAG_RE.search(text)
    if tagged:
        text = tagged.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object found; call a tool as {\"name\": ..., \"arguments\": {...}}")
    call = json.loads(text[start : end + 1])
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ValueError("a tool call needs a string field 'name'")
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        arguments = json.loads(arguments) if arguments.strip() else {}
    if not isinstance(arguments, dict):
        raise ValueError("'arguments' must be a JSON object")
    return call["name"], arguments


class ToolUseBaseEnv:
    """Multi-turn tool-use environment with instructions revealed one at a time."""

    _tools: dict = {}

    def __init__(self, max_turns: int = 30, **kwargs):
        self.max_turns = int(max_turns)
        self.state: dict = {}
        self._user_messages: list = []
        self._message_criteria: list = []
        self._current_msg = 0
        self.turn = 0
        self.reset()

    # ----- to be provided by subclasses -------------------------------------------------------
    def _setup(self, rng: random.Random) -> None:
        raise NotImplementedError("tool-use environments must implement _setup(self, rng)")

    def solution(self) -> str:
        raise NotImplementedError("tool-use environments must implement solution(self)")

    # ----- the Gym-style API ------------------------------------------------------------------
    def reset(self, seed=None):
        self._rng = random.Random(seed)
        self.state = {}
        self._user_messages = []
        self._message_criteria = []
        self._setup(self._rng)
        if len(self._user_messages) != len(self._message_criteria) or not self._user_messages:
            raise ValueError(
                f"_setup must set as many _message_criteria ({len(self._message_criteria)}) as "
                f"_user_messages ({len(self._user_messages)}), at least one"
            )
        self._current_msg = 0
        self.turn = 0
        observation = (
            f"{self._user_messages[0]}\n\nCall a tool as "
            '{"name": ..., "arguments": {...}}; when every request is handled, reply <answer>done</answer>.'
        )
        return observation, {"tools": self.get_tools(), "num_messages": len(self._user_messages)}

    def step(self, action):
        self.turn += 1
        truncated = self.turn >= self.max_turns
        answer = ANSWER_RE.search(action) if isinstance(action, str) else None
        if answer is not None:
            won = self._check_answer(answer.group(1))
            text = "All instructions completed." if won else "Submitted before every instruction was completed."
            return text, 1.0 if won else 0.0, True, truncated, {"completed": self._current_msg}
        try:
            name, arguments = parse_tool_call(action if isinstance(action, str) else "")
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            return f"Error: could not parse a tool call ({exc}).", 0.0, False, truncated, {}
        output = self._call_tool(name, arguments)
        output += self._advance_if_done()
        return output, 0.0, False, truncated, {"tool": name, "completed": self._current_msg}

    def close(self):
        pass

    # ----- tools ------------------------------------------------------------------------------
    def get_tools(self) -> list:
        """OpenAI function-calling schemas built from ``self._tools``."""
        schemas = []
        for name, spec in self._tools.items():
            properties = {}
            for arg, arg_spec in spec.get("parameters", {}).items():
                prop = {"type": arg_spec.get("type", "string")}
                for key in ("description", "enum", "items"):
                    if key in arg_spec:
                        prop[key] = arg_spec[key]
                properties[arg] = prop
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": spec.get("description", ""),
                        "parameters": {
                            "type": "object",
                            "properties": properties,
                            "required": list(spec.get("required", [])),
                        },
                    },
                }
            )
        return schemas

    def _call_tool(self, name: str, arguments: dict) -> str:
        spec = self._tools.get(name)
        method = getattr(self, f"tool_{name}", None)
        if spec is None or method is None:
            return f"Error: unknown tool '{name}'. Available tools: {', '.join(sorted(self._tools))}."
        problem = self._check_arguments(name, spec, arguments)
        if problem:
            return f"Error: {problem}"
        try:
            result = method(**arguments)
        except Exception as exc:  # a tool error is an observation, never a crash
            return f"Error: {type(exc).__name__}: {exc}"
        return result if isinstance(result, str) else json.dumps(result, sort_keys=True, default=str)

    @staticmethod
    def _check_arguments(name: str, spec: dict, arguments: dict) -> str:
        parameters = spec.get("parameters", {})
        for arg in spec.get("required", []):
            if arg not in arguments:
                return f"missing required argument '{arg}' for tool '{name}'."
        for arg, value in arguments.items():
            if arg not in parameters:
                return f"unexpected argument '{arg}' for tool '{name}'; expected one of {sorted(parameters)}."
            arg_spec = parameters[arg]
            expected = JSON_TYPES.get(arg_spec.get("type", "string"))
            wrong_bool = isinstance(value, bool) and arg_spec.get("type") in ("integer", "number")
            if expected is not None and (not isinstance(value, expected) or wrong_bool):
                return f"argument '{arg}' of tool '{name}' must be of type {arg_spec.get('type')}, got {value!r}."
            if "enum" in arg_spec and value not in arg_spec["enum"]:
                return f"argument '{arg}' of tool '{name}' must be one of {arg_spec['enum']}, got {value!r}."
        return ""

    def tool_decline_request(self, reason: str) -> str:
        """Shared implementation of the ``decline_request`` tool (add ``DECLINE_TOOL`` to ``_tools``)."""
        self.state.setdefault("declined", []).append(str(reason))
        return "Request declined."

    # ----- the multi-turn user ----------------------------------------------------------------
    def _criterion_met(self, index: int) -> bool:
        try:
            return bool(self._message_criteria[index](self.state))
        except Exception:
            return False

    def _advance_if_done(self) -> str:
        """Advance past every satisfied instruction; return the note appended to the tool output."""
        note = ""
        while self._current_msg < len(self._user_messages) and self._criterion_met(self._current_msg):
            self._current_msg += 1
            if self._current_msg < len(self._user_messages):
                note = "\n" + STEP_COMPLETE.format(message=self._user_messages[self._current_msg])
            else:
                note = "\n" + ALL_COMPLETE
        return note

    def _check_answer(self, answer: str) -> bool:
        return answer.strip().lower() == "done" and self._current_msg >= len(self._user_messages)

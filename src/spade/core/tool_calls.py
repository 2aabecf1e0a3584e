"""Native tool calls of tool-use episodes (``agent.tool_format: native``, the reference code's format).

What the reference does (spade/core/orchestrator.py:786-1015, ``_play_game_tool_use_async``):

- the episode opens with the observation as its only message, no system prompt; the environment's tool schemas
  (``get_tools()``, OpenAI function format) reach the model through its chat template,
  ``apply_chat_template(messages, tools=...)`` (:801-815);
- a reply holding ``<answer>`` is sent to ``step()`` as it is; the observation comes back as a ``user`` message
  (:880-913);
- else every parsable ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block is executed, in order, and
  each result comes back as its own ``tool`` message (:975-1000); a body may also be the XML form
  ``<function=NAME><parameter=KEY>VALUE</parameter></function>``, read before the JSON one
  (``agent.tool_call_syntax`` 'xml_json'); blocks that do not parse are skipped
  (spade/core/utils/tool_call_parser.py:114-129);
- a reply without a parsable call is sent to ``step()`` as it is (the environment answers with a format error, in
  the ``user`` role). If it holds ``<tool_call>`` (a malformed call) its sampled tokens get loss mask 0 and the
  observation gets a note with the call format (:915-960; ``SPADE_MASK_MALFORMED_TOOLCALL=1`` in both tool-use
  scripts, cmd/tool_use/_train_spade_blend.sh:272, cmd/tool_use/train_spade_4b.sh:184). The episode goes on.

Ours differs where our environments differ: they have one entry point, ``step(action)`` (spade.envs.tool_base), so
each call is sent to it as its own ``<tool_call>`` action and counts as one environment step (the reference calls
``execute_tool``, which counts none); the calls of a reply stop at the first step that ends the episode. Replies are
parsed after removing ``<think>...</think>`` spans, as every other parser of ours.

A chat template that ignores ``tools=`` (SmolLM2's) or cannot render a ``tool`` message gets a documented fallback,
chosen by probing the template once (``template_support``): the schemas are appended to the first observation as
text (what ``tool_format: text`` does), and tool results are sent in the ``user`` role.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass

from jinja2 import TemplateError

TOOL_FORMATS = ("native", "text")
# agent.tool_call_syntax: what a <tool_call> body may be. 'xml_json' (reference code, tool_call_parser.py:118-123) reads
# the XML form <function=NAME><parameter=KEY>VALUE</parameter>...</function> first and a JSON object second; 'json'
# (ours before issue 40) reads the JSON object only
CALL_SYNTAXES = ("xml_json", "json")
THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)
ANSWER_RE = re.compile(r"<answer>.*?</answer>", re.DOTALL)
CALL_BLOCK_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
XML_FUNCTION_RE = re.compile(r"<function=(\w+)>(.*?)</function>", re.DOTALL)
XML_PARAMETER_RE = re.compile(r"<parameter=(\w+)>(.*?)</parameter>", re.DOTALL)
# appended to the observation of a turn whose <tool_call> did not parse (the reference's error-as-feedback note)
MALFORMED_NOTE = ('\n\n[Format] The <tool_call> of your last reply could not be parsed. Write each call as '
                  '<tool_call>{"name": "<tool name>", "arguments": {<arguments>}}</tool_call>.')


def tools_text(tools: list) -> str:
    """The tool schemas as text after an observation (``tool_format: text``, and the native format's fallback)."""
    return "\n\nTools (OpenAI function schemas):\n" + json.dumps(tools, indent=1)


def _xml_call(body: str) -> dict | None:
    """The call of an XML-style body (``<function=NAME>`` holding ``<parameter=KEY>VALUE</parameter>`` entries), or
    None when it has no ``<function=...>`` element. A value is unescaped (HTML entities) and stripped; one that reads
    as JSON (a number, a boolean, a list, an object, a quoted string) becomes that value, any other stays text."""
    function = XML_FUNCTION_RE.search(body)
    if function is None:
        return None
    arguments = {}
    for parameter in XML_PARAMETER_RE.finditer(function.group(2)):
        value = html.unescape(parameter.group(2).strip())
        try:
            value = json.loads(value)
        except ValueError:  # plain text
            pass
        arguments[parameter.group(1)] = value
    return {"name": function.group(1), "arguments": arguments}


def _json_call(body: str) -> dict | None:
    """The call of a JSON body (an object with a string ``name``), or None."""
    try:
        value = json.loads(body.strip())
    except ValueError:  # json.JSONDecodeError
        return None
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return {"name": value["name"], "arguments": value.get("arguments", value.get("parameters", {}))}
    return None


def parse_calls(text: str, syntax: str = "json") -> list[dict]:
    """Every well-formed ``<tool_call>`` block of a reply, in order, as ``{"name", "arguments"}``.

    With ``syntax`` 'json' a block is well formed when its body is a JSON object with a string ``name`` (the
    Qwen3/Hermes format); ``arguments`` (or ``parameters``) defaults to ``{}`` and is passed on as written: the
    environment checks it. 'xml_json' (``agent.tool_call_syntax``, the reference's parser) first tries the XML form
    (``_xml_call``), then the JSON one. Blocks that are not well formed are skipped, as the reference's parser does.
    """
    if syntax not in CALL_SYNTAXES:
        raise ValueError(f"config key 'agent.tool_call_syntax' has value {syntax!r}; allowed: {list(CALL_SYNTAXES)}")
    calls = []
    for block in CALL_BLOCK_RE.finditer(THINK_RE.sub("", text)):
        call = _xml_call(block.group(1)) if syntax == "xml_json" else None
        call = call or _json_call(block.group(1))
        if call is not None:
            calls.append(call)
    return calls


def object_calls(text: str) -> tuple[list[dict], bool]:
    """The calls an API's ``tool_calls`` can carry (``parse_calls`` with an object of arguments), and whether the
    reply is malformed: a ``<tool_call>`` tag outside reasoning but no such call (BFCL's and tau2's native format)."""
    calls = [call for call in parse_calls(text) if isinstance(call["arguments"], dict)]
    return calls, not calls and "<tool_call>" in THINK_RE.sub("", text)


def call_action(call: dict) -> str:
    """The ``step()`` action of one call: the form ``spade.envs.tool_base.parse_tool_call`` reads."""
    return "<tool_call>" + json.dumps({"name": call["name"], "arguments": call["arguments"]}) + "</tool_call>"


@dataclass(frozen=True)
class TurnPlan:
    """What one reply does: ``actions`` [(step() action, role of its observation)], in order."""

    actions: list
    parsed: bool  # an answer or at least one well-formed call (the record's ``parsed_action`` counterpart)
    malformed: bool  # no well-formed call but a <tool_call> tag: the turn's sampled tokens are masked


def plan_turn(text: str, syntax: str = "json") -> TurnPlan:
    """The steps of one reply under the native format (module docstring); ``syntax``: ``agent.tool_call_syntax``."""
    visible = THINK_RE.sub("", text)
    if ANSWER_RE.search(visible):
        return TurnPlan([(text, "user")], parsed=True, malformed=False)
    calls = parse_calls(text, syntax)
    if calls:
        return TurnPlan([(call_action(call), "tool") for call in calls], parsed=True, malformed=False)
    return TurnPlan([(text, "user")], parsed=False, malformed="<tool_call>" in visible)


@dataclass(frozen=True)
class TemplateSupport:
    tools: bool  # the template renders the ``tools=`` schemas
    tool_role: bool  # the template renders a ``tool`` message's content


_PROBE_TOOL = {"type": "function", "function": {"name": "spade_probe_tool_7f3a", "description": "",
                                                "parameters": {"type": "object", "properties": {}}}}
_PROBE_RESULT = "spade_probe_result_7f3a"


def _renders(tokenizer, messages: list, needle: str, **kwargs) -> bool:
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
    except (TemplateError, ValueError, TypeError, KeyError):  # a template may refuse a role or the tools argument
        return False
    return needle in text


def template_support(tokenizer) -> TemplateSupport:
    """Probe whether the chat template renders ``tools=`` and ``tool`` messages (SmolLM2's does neither the first:
    it ignores ``tools``; it renders any role name, ``tool`` included)."""
    user = {"role": "user", "content": "probe"}
    tools = _renders(tokenizer, [user], "spade_probe_tool_7f3a", tools=[_PROBE_TOOL])
    exchange = [user, {"role": "assistant", "content": "ok"}, {"role": "tool", "content": _PROBE_RESULT}]
    return TemplateSupport(tools, _renders(tokenizer, exchange, _PROBE_RESULT))


def fit_roles(replies: list, support: TemplateSupport) -> list:
    """The reply messages in roles the template renders: ``tool`` becomes ``user`` where it cannot."""
    if support.tool_role:
        return replies
    return [{**m, "role": "user"} if m["role"] == "tool" else m for m in replies]

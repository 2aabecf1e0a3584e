"""BFCL v4 multi-turn: function calling over several user turns against simulated APIs (spec section 9).

What is measured: whether the model, talking to a user over 2-7 turns, drives BFCL's simulated APIs
(a file system, a trading bot, a travel agency, a vehicle, messaging, posting, tickets, math) to the
state and outputs the ground-truth call sequence produces. An entry scores 1 when the package's own
``multi_turn_checker`` accepts it: after every turn whose ground truth is not empty, (1) every API
instance has the same public attributes as the instance the ground-truth calls produced and (2) every
ground-truth call's execution result appears among the model's execution results so far (any order).

Data: the four multi-turn files shipped in ``bfcl-eval==2026.3.23`` (200 entries each):
``base``, ``miss_func`` (some functions are withheld and revealed at a later turn), ``miss_param``
(a turn lacks a needed value; the right move is to ask, so its ground truth is empty) and
``long_context`` (the same tasks on API states padded with long, distracting content).

Protocol, ``eval.bfcl_multi_turn.tool_format``:

- ``native`` (default; what ``agent.tool_format: native`` trains and the reference evaluates with, BFCL's
  ``QwenFCHandler``: eval_offline/suites/bfcl_full.py:34-37): no system prompt; the function docs go to the chat
  template as ``tools=``; a reply's calls are its ``<tool_call>`` blocks (spade.core.tool_calls.parse_calls), each
  result one ``tool`` message (a template without tool support: spade.core.tool_calls' fallbacks); a withheld
  function is announced as in prompting mode. Item records are kept per format (``protocol``).
- ``prompting`` (before issue 32): BFCL's prompting mode (``BaseHandler.inference_multi_turn_prompting``, the OSS
  handler, ``DEFAULT_SYSTEM_PROMPT_FORMAT``); it and what both formats share:
- the system prompt is BFCL's "classic / plaintext" prompt with the involved classes' function docs as indented
  JSON; the model must answer with nothing but a Python-syntax list of keyword calls, ``[f(param=v, ...), ...]``;
- within a user turn the model takes steps: each reply is decoded; a reply with calls is executed and
  the results are sent back; a reply that decodes to no call (plain text, or anything undecodable) ends
  the turn and the next user message follows;
- after more than ``max_steps_per_turn`` executed steps in one turn the entry is force-terminated
  (BFCL's ``MAXIMUM_STEP_LIMIT`` = 20); a force-terminated entry fails unless it was in the last turn;
- ``miss_func`` turns without a user message announce the withheld functions with BFCL's
  ``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING``.

Metrics: ``accuracy/<category>`` (share of entries the checker accepts) for base, miss_func,
miss_param and long_context, and ``accuracy``, the unweighted mean over the evaluated categories
(BFCL's ``calculate_unweighted_accuracy``; the paper's "BFCL v4 multi-turn" columns).

Deviations from BFCL's harness (documented in docs/evals/bfcl_multi_turn.md):

- No ``eval`` of model output. BFCL ``eval``s a Python string per decoded call (and arithmetic and lambda
  arguments), which would run model text on the host. Here a reply is parsed with ``ast``, arguments must be
  literals (constants, lists, tuples, dicts, a leading minus; bare names become strings as in BFCL), and a call
  becomes a direct ``getattr(instance, method)(**arguments)`` on the simulated API instance, restricted to the
  public methods of the entry's classes. Other argument expressions count as undecodable, which ends the turn as
  any decoding failure does in BFCL.
- Scoring calls the package's ``multi_turn_checker`` unchanged, with one substitution: the function
  it uses to execute calls runs the model's calls through the same direct-call executor, while the
  ground truth (package data) still goes through the package's own ``execute_multi_turn_func_call``.
- Prompting mode sends the execution results back as one user message holding BFCL's
  ``format_execution_results_prompting`` text; BFCL's OSS handler appends one ``tool`` message per call.
- The reply is decoded after the last ``</think>`` (as BFCL's reasoning-model handlers do).
- Sampling: the reference's greedy decoding with bfcl_eval's 4,096-token cap (``eval.sampling``); a conversation
  that outgrows the context window scores 0 (in BFCL the inference call would fail and the entry too).
- The simulated APIs run in-process, as in BFCL: they are package code and the model only chooses a
  listed method and literal arguments; a pathological argument (e.g. a huge integer exponent for
  ``power``) could stall the evaluation, but cannot run code.
"""

from __future__ import annotations

import ast
import copy
import decimal
import importlib
import inspect
import itertools
import json
import math
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from spade.configtools import ConfigError, option
from spade.core import tool_calls
from spade.evals.base import (Benchmark, Conversation, DataMissing, EvalContext, Item, ItemRecord, Metric,
                              max_new_tokens_option, mean_metric, play_conversations, prompt_hash, temperature_option,
                              top_k_option, top_p_option)
from spade.evals.registry import register_benchmark

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
TOOL_FORMATS = ("native", "prompting")  # eval.bfcl_multi_turn.tool_format (module docstring)
SELECTIONS = ("spaced", "shortest")  # how eval.bfcl_multi_turn.max_entries_per_category picks entries
INSTALL_HINT = "pip install --no-deps bfcl-eval==2026.3.23"
ERROR_PREFIX = "Error during execution: "
# BFCL refuses these method names before eval (multi_turn_utils.execute_multi_turn_func_call); kept for parity.
BLOCKED_NAMES = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")


@dataclass(frozen=True)
class BfclMultiTurnConfig:
    categories: list = option(list(CATEGORIES), "BFCL v4 multi-turn categories to evaluate (paper: all four: base, "
                              "miss_func, miss_param, long_context).")
    max_entries_per_category: int = option(0, "0 = all 200 entries of each category (paper); else N entries per "
                                           "category, evenly spaced over the file (the files are grouped by API "
                                           "classes), for a cheaper toy evaluation.", min=0)
    selection: str = option("spaced", "Which entries max_entries_per_category keeps: 'spaced' (evenly spaced over the "
                            "file, the default) or 'shortest' (those with the shortest first prompt: the function docs "
                            "and the first user turn, counted in characters; ties in file order). 'shortest' picks the "
                            "entries that fit a small model's context window (the tool-use toy); the shortest first "
                            "prompt is about 20k characters, about 6k tokens.", choices=SELECTIONS)
    max_steps_per_turn: int = option(20, "Executed call steps allowed in one user turn before the entry is "
                                     "force-terminated (BFCL MAXIMUM_STEP_LIMIT = 20). Lower only for smoke tests: "
                                     "it fails entries that need more steps.", min=1)
    temperature: float = temperature_option(0.0, "eval_offline/configs/tool_use.yaml:9, greedy")
    top_p: float = top_p_option(1.0, "not sent by bfcl_eval's local-model handler")
    top_k: int = top_k_option(0, "not sent")
    max_new_tokens: int = max_new_tokens_option(4096, "bfcl_eval base_oss_handler.py: min(4096, context left)")
    tool_format: str = option("native", "'native' (reference, as agent.tool_format native): tools= in the chat "
                              "template, <tool_call> blocks, one 'tool' message per result; 'prompting' (before issue "
                              "32): BFCL's prompting mode (module docstring).", choices=TOOL_FORMATS)


# ------------------------------------------------------------------------------------------------ data
def data_dir() -> Path:
    """The package's data folder (BFCL's ``PROMPT_PATH``); DataMissing when bfcl-eval is absent."""
    try:
        import bfcl_eval
    except ImportError as exc:
        raise DataMissing(f"benchmark 'bfcl_multi_turn' needs the bfcl-eval package ({exc}); install it with "
                          f"`{INSTALL_HINT}` (config key: eval.bfcl_multi_turn.categories)") from exc
    return Path(bfcl_eval.__file__).parent / "data"


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise DataMissing(f"BFCL data file {path} is missing; reinstall with `{INSTALL_HINT}`")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"malformed BFCL data file {path}, line {number}: {exc}") from exc
    return rows


@cache
def _function_docs(class_name: str) -> tuple:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    return tuple(_read_jsonl(data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))


def prepare_entry(raw: dict) -> dict:
    """Attach function docs as ``bfcl_eval.utils.load_dataset_entry`` does for multi-turn entries.

    Mirrors ``populate_test_cases_with_predefined_functions`` (docs of every involved class; withheld
    ``miss_func`` docs moved from ``function`` to ``missed_function[turn]``) and
    ``add_language_specific_hint_to_function_doc`` (Python hint). Re-implemented because importing
    ``bfcl_eval.utils`` creates result/score/lock folders inside the installed package.
    """
    entry = copy.deepcopy(raw)
    entry["function"] = [copy.deepcopy(doc) for name in entry["involved_classes"] for doc in _function_docs(name)]
    if "missed_function" in entry:
        for turn, names in entry["missed_function"].items():
            entry["missed_function"][turn] = []
            for name in names:
                for i, doc in enumerate(entry["function"]):
                    if doc["name"] == name:
                        entry["missed_function"][turn].append(entry["function"].pop(i))
                        break
    for doc in entry["function"]:  # withheld docs were moved out first, so (as in BFCL) they get no hint
        doc["description"] += " Note that the provided function is in Python 3 syntax."
    return entry


@cache
def load_category(category: str) -> tuple:
    """(entries, ground truths) of one category, in file order, checked to be aligned."""
    if category not in CATEGORIES:
        raise ConfigError(f"unknown BFCL multi-turn category {category!r} in eval.bfcl_multi_turn.categories; "
                          f"allowed: {list(CATEGORIES)}")
    name = f"BFCL_v4_multi_turn_{category}.json"
    entries = [prepare_entry(raw) for raw in _read_jsonl(data_dir() / name)]
    answers = _read_jsonl(data_dir() / "possible_answer" / name)
    if [e["id"] for e in entries] != [a["id"] for a in answers]:
        raise ConfigError(f"BFCL data file {name} and its possible answers list different entry ids")
    return tuple(entries), tuple(a["ground_truth"] for a in answers)


def spaced_indices(total: int, wanted: int) -> list[int]:
    """``wanted`` indices evenly spread over ``range(total)`` (all of them when wanted is 0 or too big)."""
    if wanted <= 0 or wanted >= total:
        return list(range(total))
    return [i * total // wanted for i in range(wanted)]


def shortest_indices(lengths: list[int], wanted: int) -> list[int]:
    """The indices of the ``wanted`` smallest ``lengths`` (ties: the earlier index), in file order; all of them when
    wanted is 0 or too big."""
    if wanted <= 0 or wanted >= len(lengths):
        return list(range(len(lengths)))
    return sorted(sorted(range(len(lengths)), key=lambda i: (lengths[i], i))[:wanted])


def first_prompt_chars(entry: dict) -> int:
    """Characters of an entry's first prompt (the system prompt with the function docs, and the first user turn)."""
    return sum(len(message["content"]) for message in first_messages(entry))


# ------------------------------------------------------------------------------------------------ prompts
def system_prompt(functions: list) -> str:
    """BFCL's default prompting system prompt (``formulate_system_prompt`` with ``DEFAULT_SYSTEM_PROMPT_FORMAT``).

    Built from the package's own templates; ``bfcl_eval.model_handler.utils`` itself is not imported
    because it needs tree-sitter parsers for Java/JavaScript.
    """
    from bfcl_eval.constants.default_prompts import (DEFAULT_SYSTEM_PROMPT_FORMAT, OUTPUT_FORMAT_MAPPING,
                                                     PARAM_TYPE_MAPPING, PROMPT_STYLE_TEMPLATES,
                                                     PROMPT_TEMPLATE_MAPPING)

    fmt = dict(pair.split("=", 1) for pair in DEFAULT_SYSTEM_PROMPT_FORMAT.split("&"))
    if (fmt["ret_fmt"], fmt["tool_call_tag"], fmt["func_doc_fmt"]) != ("python", "False", "json"):
        raise RuntimeError(f"unexpected BFCL default prompt format {DEFAULT_SYSTEM_PROMPT_FORMAT!r}")
    style = PROMPT_STYLE_TEMPLATES[fmt["style"]]
    return PROMPT_TEMPLATE_MAPPING[fmt["prompt_fmt"]].format(
        persona=style["persona"],
        task=style["task"],
        tool_call_format=style["tool_call_no_tag"].format(output_format=OUTPUT_FORMAT_MAPPING["python"],
                                                          param_types=PARAM_TYPE_MAPPING["python"]),
        multiturn_behavior=style["multiturn_behavior"],
        available_tools=style["available_tools"].format(format="json", functions=json.dumps(functions, indent=4)),
    )


def first_messages(entry: dict) -> list[dict]:
    """Turn 0 with the system prompt in front (``system_prompt_pre_processing_chat_model``)."""
    messages = copy.deepcopy(entry["question"][0])
    prompt = system_prompt(entry["function"])
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] = prompt + "\n\n" + messages[0]["content"]
    else:
        messages.insert(0, {"role": "system", "content": prompt})
    return messages


def native_first_messages(entry: dict, support: tool_calls.TemplateSupport) -> list[dict]:
    """Turn 0 without a system prompt (``QwenFCHandler._pre_query_processing_prompting``); the docs follow the first
    user message as text when the template ignores ``tools=``."""
    messages = copy.deepcopy(entry["question"][0])
    if not support.tools:
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages[last_user]["content"] += tool_calls.tools_text(entry["function"])
    return messages


def turn_message(entry: dict, turn: int) -> str:
    """The user message opening ``turn`` (> 0); a withheld-function turn announces the new functions."""
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING

    holdout = entry.get("missed_function", {})
    if str(turn) in holdout:
        return DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=holdout[str(turn)])
    return "\n\n".join(m["content"] for m in entry["question"][turn])  # every turn holds one user message


# ------------------------------------------------------------------------------------------------ decoding
@dataclass(frozen=True)
class Call:
    """One decoded function call: a name and keyword arguments that are plain literals."""

    name: str
    arguments: dict

    def render(self) -> str:
        """BFCL's execution-string form, used only to show the call back to the model."""
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.arguments.items())})"


class CallFormatError(ValueError):
    """A reply is not a list of calls with literal arguments."""


def _literal(node: ast.AST):
    """An argument value, following BFCL's ``resolve_ast_by_type`` for the node types that need no eval."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, ast.List):
        return [_literal(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_literal(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise CallFormatError("dict unpacking (**) in an argument")
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name):  # BFCL passes a bare name as its string
        return node.id
    # BFCL evals BinOp and Lambda arguments and executes nested calls; here they are refused.
    raise CallFormatError(f"argument is not a literal: {type(node).__name__}")


def _call(node: ast.AST) -> Call:
    if not isinstance(node, ast.Call):
        raise CallFormatError(f"list element is not a call: {type(node).__name__}")
    parts, func = [], node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        raise CallFormatError("called object is not a function name")
    parts.append(func.id)
    arguments = {}
    for keyword in node.keywords:  # positional arguments are ignored, as in BFCL's resolve_ast_call
        if keyword.arg is None:
            raise CallFormatError("keyword unpacking (**) in a call")
        arguments[keyword.arg] = _literal(keyword.value)
    return Call(".".join(reversed(parts)), arguments)


def decode_calls(text: str) -> list[Call]:
    """Parse a reply like BFCL's ``default_decode_execute_prompting``; raises ``CallFormatError``.

    ``[]`` (or plain ``[]``-like text) decodes to no calls. Nothing in the reply is evaluated.
    """
    text = text.split("</think>")[-1].strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    try:
        body = ast.parse(text.strip().strip("'"), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CallFormatError(f"not Python syntax: {exc}") from exc
    if isinstance(body, ast.Call):
        return [_call(body)]
    if not isinstance(body, (ast.List, ast.Tuple, ast.Set)):
        raise CallFormatError(f"not a list of calls: {type(body).__name__}")
    try:
        return [_call(node) for node in body.elts]
    except RecursionError as exc:
        raise CallFormatError("arguments nested too deeply") from exc


def native_calls(text: str) -> list[Call]:
    """The calls of a native-format reply: its well-formed ``<tool_call>`` blocks, in order; raises
    ``CallFormatError`` when it has ``<tool_call>`` blocks and none is a call with an object of arguments."""
    calls, malformed = tool_calls.object_calls(text)
    if malformed:
        raise CallFormatError("no <tool_call> block holds a call with an object of arguments")
    return [Call(c["name"], c["arguments"]) for c in calls]


# ------------------------------------------------------------------------------------------------ execution
def result_text(value) -> str:
    """Stringify a method's return value as ``execute_multi_turn_func_call`` does."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


class ApiSession:
    """The simulated API instances of one entry, built as ``execute_multi_turn_func_call`` builds them.

    Calls are direct method calls on these instances: a name maps to the public bound method of the
    last involved class that defines it (BFCL's ``class_method_name_mapping``); nothing is eval'd.
    """

    def __init__(self, initial_config: dict, involved_classes: list, long_context: bool):
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

        self.instances: dict = {}
        self.methods: dict = {}
        for class_name in involved_classes:
            instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)()
            if class_name not in STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
            self.instances[class_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = method

    def execute_one(self, call: Call) -> str:
        short = call.name.split(".")[1] if "." in call.name else call.name
        if short in BLOCKED_NAMES:
            return f"{ERROR_PREFIX}Function call {short} is not allowed."
        method = self.methods.get(call.name)
        if method is None:  # what eval would raise for a name that is not an API method
            return f"{ERROR_PREFIX}name {call.name.split('.')[0]!r} is not defined"
        try:
            # fresh copies: an instance may keep (and later mutate) an argument, and calls are replayed for scoring
            with decimal.localcontext():  # MathAPI sets the decimal precision globally
                return result_text(method(**copy.deepcopy(call.arguments)))
        except Exception as exc:  # noqa: BLE001 -- as BFCL: any API error becomes the call's result text
            return f"{ERROR_PREFIX}{exc}"

    def execute(self, calls: list[Call]) -> list[str]:
        return [self.execute_one(call) for call in calls]


def is_long_context(entry_id: str) -> bool:
    category = entry_id.rsplit("_", 1)[0]
    return "long_context" in category or "composite" in category


def session_for(entry: dict) -> ApiSession:
    return ApiSession(entry.get("initial_config", {}), entry["involved_classes"], is_long_context(entry["id"]))


def format_results(calls: list[Call], results: list[str]) -> str:
    """BFCL's ``format_execution_results_prompting``: the results as one message."""
    return repr([{"role": "tool", "name": call.render(), "content": result} for call, result in zip(calls, results)])


# ------------------------------------------------------------------------------------------------ scoring
_CHECK_LOCK = threading.Lock()
_CHECK_IDS = itertools.count()


def check_entry(entry: dict, ground_truth: list, decoded: list) -> dict:
    """Run the package's ``multi_turn_checker`` on the model's decoded calls (turn -> step -> calls).

    The checker re-executes both sides from the initial state. Its executor is swapped, for the
    duration of the call, for one that sends the model's ``Call`` objects to ``ApiSession`` and the
    ground-truth strings (package data) to the package's own ``execute_multi_turn_func_call``.
    A unique model name per check keeps the package's global instance cache from leaking state
    between checks; its entries are deleted afterwards.
    """
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as checker_module
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    if len(decoded) != len(ground_truth):  # as eval_runner._evaluate_single_multi_turn_entry
        return {"valid": False, "error_type": "multi_turn:force_terminated",
                "error_message": f"the model played {len(decoded)} of {len(ground_truth)} turns"}
    original = multi_turn_utils.execute_multi_turn_func_call
    sessions: dict = {}
    check_name = f"spade_check_{next(_CHECK_IDS)}"  # the "model name" the checker keys its cached instances by

    def execute(func_call_list, initial_config, involved_classes, model_name, test_entry_id, long_context=False,
                is_evaL_run=False):
        if func_call_list and all(isinstance(c, Call) for c in func_call_list):
            key = (model_name, test_entry_id)
            if key not in sessions:
                sessions[key] = ApiSession(initial_config, involved_classes, long_context)
            return sessions[key].execute(func_call_list), dict(sessions[key].instances)
        if any(isinstance(c, Call) for c in func_call_list):
            raise TypeError("a step mixes decoded calls and call strings")
        return original(func_call_list, initial_config, involved_classes, model_name, test_entry_id,
                        long_context=long_context, is_evaL_run=is_evaL_run)

    with _CHECK_LOCK:
        checker_module.execute_multi_turn_func_call = execute
        try:
            with decimal.localcontext():
                result = checker_module.multi_turn_checker(decoded, ground_truth, entry, entry["id"].rsplit("_", 1)[0],
                                                           check_name)
        except AssertionError as exc:  # the checker's own consistency asserts (instance sets differ)
            result = {"valid": False, "error_type": "multi_turn:checker_assertion", "error_message": str(exc)}
        finally:
            checker_module.execute_multi_turn_func_call = original
            for name in [n for n in vars(multi_turn_utils) if n.startswith(check_name + "_")]:
                delattr(multi_turn_utils, name)
    return result


# ------------------------------------------------------------------------------------------------ play
class BfclConversation(Conversation):
    """One entry played as BFCL's prompting loop: steps within user turns, results fed back."""

    def __init__(self, entry: dict, max_steps_per_turn: int, support: tool_calls.TemplateSupport | None = None):
        """``support``: the chat template's tool support for the native format; None = prompting mode."""
        self.native, self.support = support is not None, support
        super().__init__(native_first_messages(entry, support) if self.native else first_messages(entry))
        self.tools = entry["function"] if self.native and support.tools else None
        self.initial = list(self.messages)  # the first prompt (for the record's prompt hash)
        self.entry, self.max_steps = entry, max_steps_per_turn
        self.session = session_for(entry)
        self.turn, self.steps = 0, 0
        self.decoded: list = [[]]  # turn -> executed steps -> calls (steps that decoded to >= 1 call)
        self.force_quit = False
        self.decode_errors = 0

    def respond(self, text: str) -> str | list | None:
        try:
            calls = native_calls(text) if self.native else decode_calls(text)
        except CallFormatError:
            calls = []
            self.decode_errors += 1
        if not calls:  # no call: the turn is over
            return self._next_turn()
        results = self.session.execute(calls)
        self.decoded[-1].append(calls)
        self.steps += 1
        if self.steps > self.max_steps:  # BFCL: count > MAXIMUM_STEP_LIMIT -> force quit
            self.force_quit = True
            return None
        if self.native:  # one tool message per call, as BFCL's OSS handler
            return tool_calls.fit_roles([{"role": "tool", "content": r} for r in results], self.support)
        return format_results(calls, results)

    def _next_turn(self) -> str | None:
        self.turn += 1
        if self.turn >= len(self.entry["question"]):
            return None
        self.decoded.append([])
        self.steps = 0
        return turn_message(self.entry, self.turn)

    @property
    def max_model_calls(self) -> int:
        return len(self.entry["question"]) * (self.max_steps + 1)


def score_conversation(conversation: BfclConversation, ground_truth: list) -> tuple[float, dict]:
    if conversation.stop_reason != "done":  # context window exhausted: an inference failure in BFCL
        return 0.0, {"error_type": f"multi_turn:{conversation.stop_reason}", "error_message": ""}
    result = check_entry(conversation.entry, ground_truth, conversation.decoded)
    if result["valid"]:
        return 1.0, {"error_type": "", "error_message": ""}
    return 0.0, {"error_type": result.get("error_type", ""), "error_message": str(result.get("error_message", ""))[:500]}


@register_benchmark
class BfclMultiTurn(Benchmark):
    name = "bfcl_multi_turn"
    config_cls = BfclMultiTurnConfig

    def protocol(self) -> dict:
        return {"tool_format": self.config.tool_format}

    def check_data(self) -> None:
        self._categories()
        for category in self.config.categories:
            load_category(category)

    def _categories(self) -> list:
        categories = list(self.config.categories)
        bad = [c for c in categories if c not in CATEGORIES]
        if bad or not categories or len(set(categories)) != len(categories):
            raise ConfigError(f"config key 'eval.bfcl_multi_turn.categories' = {categories!r} is invalid "
                              f"(unknown, empty or repeated); allowed values: {list(CATEGORIES)}")
        return categories

    def items(self) -> list[Item]:
        items = []
        for category in self._categories():
            entries, _ = load_category(category)
            wanted = self.config.max_entries_per_category
            if self.config.selection == "shortest":
                indices = shortest_indices([first_prompt_chars(entry) for entry in entries], wanted)
            else:
                indices = spaced_indices(len(entries), wanted)
            for index in indices:
                entry_id = entries[index]["id"]
                if entry_id != f"multi_turn_{category}_{index}":
                    raise ConfigError(f"BFCL {category} entry {index} has unexpected id {entry_id!r}")
                items.append(Item(f"{category}/{index:03d}", {"category": category, "index": index}, group=category))
        return items

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        tokenizer = ctx.backend.tokenizer
        support = tool_calls.template_support(tokenizer) if self.config.tool_format == "native" else None
        conversations, truths = [], []
        for item in items:
            entries, answers = load_category(item.payload["category"])
            conversations.append(BfclConversation(entries[item.payload["index"]], self.config.max_steps_per_turn,
                                                  support))
            truths.append(answers[item.payload["index"]])
        play_conversations(ctx, conversations, [ctx.item_seed(item.id) for item in items],
                           max_turns=max(c.max_model_calls for c in conversations))
        records = []
        for item, conversation, truth in zip(items, conversations, truths):
            score, info = score_conversation(conversation, truth)
            first = tokenizer.apply_chat_template(conversation.initial, tools=conversation.tools, tokenize=False,
                                                  add_generation_prompt=True)
            records.append(ItemRecord(
                id=item.id,
                prompt_hash=prompt_hash(first),
                response="\n\n".join(conversation.replies),  # every reply of every step, in order
                score=score,
                turns=len(conversation.replies),
                tokens=conversation.tokens,
                group=item.group,
                extra={"entry_id": conversation.entry["id"], **info, "stop_reason": conversation.stop_reason,
                       "force_quit": conversation.force_quit, "decode_errors": conversation.decode_errors,
                       "user_turns_played": len(conversation.decoded),
                       "calls": [[[c.render() for c in step] for step in turn] for turn in conversation.decoded]},
            ))
        return records

    def aggregate(self, records) -> list[Metric]:
        per_category = [mean_metric(f"accuracy/{c}", [r.score for r in records if r.group == c])
                        for c in CATEGORIES if any(r.group == c for r in records)]
        if not per_category:
            return [mean_metric("accuracy", [])]
        value = sum(m.value for m in per_category) / len(per_category)
        # standard error of an unweighted mean of independent category means
        stderr = math.sqrt(sum(m.stderr ** 2 for m in per_category)) / len(per_category)
        # a diagnostic, not a BFCL column: entries whose prompt outgrew eval.max_context_tokens (scored 0)
        cut = mean_metric("context_limit_rate", [float(r.extra.get("stop_reason") == "context_limit") for r in records])
        return [Metric("accuracy", value, sum(m.n for m in per_category), stderr)] + per_category + [cut]

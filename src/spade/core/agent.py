"""The reasoning agent: batched multi-turn episodes over sandboxed environments (spec sections 2-3).

Every unfinished episode of a batch generates its next turn together (one backend call per turn).
An episode is kept as ONE exact token sequence: the rendered first prompt, then for every turn the
sampled tokens (trained, ``loss_mask`` 1) and the tokens of the next observation rendered by the chat
template (never trained, mask 0); with ``agent.response_prefix`` (toy only) its tokens follow every
generation prompt (mask 0) and its text opens the reply the parser reads. Generated code runs only in
the sandbox; the model's text reaches the environment as one extracted action per turn:

- games: the first ``\\boxed{...}`` span (brace-balanced); the raw text if there is none, so the
  environment can answer with its own format reminder;
- tool use, ``agent.tool_format: text``: ``<answer>...</answer>`` if present, else the first tool call
  (``<tool_call>{...}</tool_call>`` or a bare JSON object with a ``name``); the tools are listed as text after the
  first observation and every observation comes back in the ``user`` role;
- tool use, ``agent.tool_format: native`` (the reference's, spade.core.tool_calls): no system prompt, the tools
  rendered by the chat template (``tools=``), every ``<tool_call>`` of a reply executed in order (one ``step()``
  each), each result a ``tool`` message; a reply whose ``<tool_call>`` does not parse is masked from the loss.

The episode return follows spec 3.4: the final step's reward if the episode terminated, else 0. Every record
also counts its turns without a parsable action (``parsed_action`` None) and its turns cut at
``max_new_tokens``, and carries its ``cause`` (spade.core.failures.episode_cause): why it earned nothing, or
"earned".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from spade.designer.prompts import AGENT_PROMPT_STYLES
from spade.configtools import option
from spade.inference.generation import GenerationBackend, SamplingParams, cut_to_limit
from spade.core import tool_calls
from spade.core.tool_calls import ANSWER_RE, CALL_BLOCK_RE, THINK_RE
from spade.core.failures import episode_cause
from spade.core.rewards import episode_return, is_win
from spade.seeding import derive_seed
from spade.sandbox.pool import SandboxPool, precompile

OUTCOMES = ("terminated", "truncated", "turn_limit", "context_limit", "cut_turn", "env_failure")
ENDED = ("terminated", "truncated", "context_limit", "cut_turn", "env_failure")  # outcomes that stop an episode
COMPILED_KEPT = 64  # environments whose compiled code a runner keeps (a set of the paper's holds 72 designs)


@dataclass(frozen=True)
class AgentConfig:
    max_turns: int = option(25, "Most agent turns per episode (paper: 25).", min=1)
    max_new_tokens: int = option(8192, "Most tokens the agent generates per turn (paper: 8,192).", min=1)
    max_context_tokens: int = option(32768, "Longest episode token sequence (paper: 32,768).", min=16)
    temperature: float = option(0.6, "Agent sampling temperature (paper: 0.6).", min=0.0)
    top_p: float = option(1.0, "Agent nucleus sampling mass; 1.0 = off (paper: not stated; reference code 0.95, set in "
                               "the recipes).", min=0.0)
    top_k: int = option(0, "Agent samples among its k most likely tokens; 0 = off (paper: not stated; reference code "
                           "20, set in the recipes).", min=0)
    paired_arms: bool = option(
        True, "Deviation (ours): hint and no-hint arms share seeds. false = unrelated seeds, as the official code."
    )
    prompt_style: str = option(
        "paper", "What an episode starts with: 'paper' = the system prompt; 'demonstration' (ours) adds one worked "
        "exchange in the games' \\boxed{} answer format, for models too small to follow the instruction alone; 'bare' "
        "(ours, the learning check's tiny random model) no system prompt: the episode starts with its observation.",
        choices=AGENT_PROMPT_STYLES)
    response_prefix: str = option(
        "", "Deviation (ours, toy only): text that opens every agent turn right after the chat template's generation "
        "prompt, e.g. '\\boxed{' so a model too small to follow the answer format still writes one. It is part of the "
        "prompt tokens (loss mask 0, never trained) and of the text the action parser reads; the environment's "
        "reward is unchanged. '' = none (paper).")
    cut_turns: str = option(
        "end", "A turn that hits max_new_tokens (or the context budget) without an end-of-sequence token: 'end' "
        "(reference code, orchestrator.py:476-490) ends the episode there, outcome 'cut_turn' (or 'context_limit' "
        "when the context budget cut it), return 0, the environment never sees the reply; 'continue' (ours before "
        "issue 32) sends the cut reply's action to the environment and closes the turn with an eos.",
        choices=("end", "continue"))
    turn_limit: str = option(
        "own", "Turn limit of a designer-written environment: 'own' (reference code, respect_game_max_turns, "
        "orchestrator.py:330-335) builds the class with its own defaults and caps its max_turns attribute at "
        "agent.max_turns; 'budget' (ours before issue 32) passes max_turns=agent.max_turns to every environment. "
        "Library, RLVE and evaluation environments always get the budget. The runner never plays more than "
        "agent.max_turns turns.", choices=("own", "budget"))
    truncated_episodes: str = option(
        "train", "No-hint episodes the environment did not terminate (truncated, turn limit, cut turn, context "
        "limit): 'train' trains them with their return (0 unless partial); 'mask' (the reference's "
        "--spade-compact-filter, set by every tool-use script, spade_rollout.py:809-818) keeps them in their group's "
        "z-score but zeroes their loss mask. Reference: off for games (this default), on for tool use (the tool-use "
        "recipe).", choices=("train", "mask"))
    turn_samples: str = option(
        "episode", "How a multi-turn episode becomes training samples: 'episode' keeps ONE token sequence per episode "
        "(every later turn sees the earlier replies exactly as sampled, thinking included); 'per_turn' (the reference's "
        "thinking actor, spade_rollout.py:879-911, orchestrator.py _play_game_thinking_async) re-renders every turn's "
        "prompt from the conversation with the chat template, so a template that drops earlier turns' <think> blocks "
        "(Qwen3) conditions each turn on what deployment shows, and each turn is its own sample with the episode's "
        "advantage, fanned out after the batch is cut. 'per_turn' needs the local trainer (OpenRLHF takes a fixed "
        "number of responses per prompt).", choices=("episode", "per_turn"))
    failed_plays: str = option(
        "drop", "A no-hint play that ends in an environment failure (sandbox error, timeout, crash): 'drop' "
        "(reference code) leaves it out of its group's z-score, the window statistics and the training batch, and "
        "counts it in the step metric 'dropped_plays'; 'zero' (before issue 14) keeps it with return 0.",
        choices=("drop", "zero"))
    tool_format: str = option(
        "native", "Tool-use episodes only (games are unchanged): 'native' (reference code) = no system prompt, the "
        "tools rendered by the chat template's tools= argument, every <tool_call>{\"name\": ..., \"arguments\": ...}"
        "</tool_call> of a reply executed in order, each result a 'tool' message, a reply whose <tool_call> does not "
        "parse masked from the loss (a template without tool support gets the tools as text and results as 'user' "
        "messages); 'text' (before issue 32) = our system prompt, the tools as text, one call per turn, observations "
        "as 'user' messages.", choices=tool_calls.TOOL_FORMATS)
    enable_thinking: bool | None = option(
        None, "The chat template's enable_thinking for every agent turn (Qwen3-8B's thinking switch; templates that "
        "do not read it ignore it). null = the template's default (Qwen3-8B: thinking). The reference's Qwen3-8B runs "
        "give the actor enable_thinking true (--spade-actor-enable-thinking, cmd/games/train_spade_8b.sh:140-143; "
        "orchestrator.py:148-156, 384, 623, 812), set in the 8B paper run files.", choices=(None, True, False))
    tool_call_syntax: str = option(
        "xml_json", "Native tool-use format only: what the body of a <tool_call> block may be. 'xml_json' (reference "
        "code, spade/core/utils/tool_call_parser.py:118-123) reads the XML form <function=NAME><parameter=KEY>VALUE"
        "</parameter></function> first (a value that parses as JSON becomes that value, else it stays text), then a "
        "JSON object with a name; 'json' (ours before issue 40) reads the JSON object only, so an XML-style call is "
        "malformed (masked, no step). Evaluations (BFCL, tau2) read JSON bodies whatever this says.",
        choices=tool_calls.CALL_SYNTAXES)


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to play."""

    env_id: str
    code: str
    class_name: str
    kind: str  # "game" or "tool_use"
    seed: int
    arm: str = "no_hint"  # "no_hint" or "hint"
    hint: str = ""
    env_kwargs: dict = field(default_factory=dict)  # extra constructor arguments, e.g. a library ``level``
    own_turn_limit: bool = False  # a designer-written class keeps its own max_turns, capped (agent.turn_limit 'own')
    reset_seed: int | None = None  # the seed the environment is opened and reset with; None = ``seed``
                                   # (selfplay.same_problem: one per environment and step)


@dataclass
class EpisodeRecord:
    env_id: str
    seed: int
    arm: str
    turns: int = 0
    generated_tokens: int = 0
    rewards: list = field(default_factory=list)  # reward of every environment step (a native tool-use turn may take several)
    final_return: float = 0.0  # spec 3.4
    won: bool = False
    outcome: str = "turn_limit"  # one of OUTCOMES
    failure: str = ""  # the sandbox outcome's description when outcome == "env_failure"
    unparsed_turns: int = 0  # turns whose reply held no parsable action (parsed_action None)
    cut_turns: int = 0  # turns whose reply hit max_new_tokens (finish_reason "length")
    last_parsed: bool = False  # the last reply held a parsable action
    last_cut: bool = False  # the last reply hit max_new_tokens
    cause: str = ""  # spade.core.failures.EPISODE_CAUSES, set when the episode ends
    token_ids: list = field(default_factory=list, repr=False)  # [T] the whole episode
    loss_mask: list = field(default_factory=list, repr=False)  # [T] 1 on tokens the agent sampled
    rollout_logprobs: list = field(default_factory=list, repr=False)  # [T] sampling log-probs (0 off-mask)
    # agent.turn_samples 'per_turn': {"prompt_ids", "output_ids", "logprobs", "trained"?} of every turn ("trained"
    # False: a malformed native call); token_ids, loss_mask and rollout_logprobs then hold the last turn only
    turn_records: list = field(default_factory=list, repr=False)

    def summary(self) -> dict:
        data = asdict(self)
        for key in ("token_ids", "loss_mask", "rollout_logprobs", "turn_records"):
            data.pop(key)
        return data


def first_boxed(text: str) -> str | None:
    """The content of the first brace-balanced ``\\boxed{...}`` in ``text``, or None."""
    start = text.find("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


def _named_object(text: str) -> bool:
    """Whether ``text`` starts with a JSON object that has a ``name`` (a bare tool call)."""
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return False
    return isinstance(value, dict) and "name" in value


def parsed_action(text: str, kind: str) -> str | None:
    """The action of one model turn in the format the agent was asked for (module docstring); None when the reply
    holds none (games: no ``\\boxed{...}``; tool use: no answer, no tool call, no JSON object with a ``name``)."""
    visible = THINK_RE.sub("", text).strip()
    if kind == "tool_use":
        answer = ANSWER_RE.search(visible)
        if answer:
            return answer.group(0)
        tagged = CALL_BLOCK_RE.search(visible)
        if tagged:
            return tagged.group(1).strip()
        start = visible.find("{")
        return visible[start:] if start >= 0 and _named_object(visible[start:]) else None
    boxed = first_boxed(visible)
    return None if boxed is None else "\\boxed{" + boxed + "}"


def extract_action(text: str, kind: str) -> str:
    """The action sent to the environment for one model turn (see the module docstring): ``parsed_action``, else
    the raw text (tool use: from its first ``{``), so that the environment answers with its own format reminder."""
    action = parsed_action(text, kind)
    if action is not None:
        return action
    visible = THINK_RE.sub("", text).strip()
    start = visible.find("{") if kind == "tool_use" else -1
    return visible[start:] if start >= 0 else visible


def loss_masked(record: EpisodeRecord, config: AgentConfig) -> bool:
    """Whether a no-hint episode trains nothing (``agent.truncated_episodes`` 'mask', the reference's compact
    filter): the environment did not terminate it. It still counts in its group's z-score."""
    return config.truncated_episodes == "mask" and record.outcome not in ("terminated", "env_failure")


def settle(record: EpisodeRecord) -> EpisodeRecord:
    """Set the ``cause`` of an ended episode (spade.core.failures.episode_cause); returns it."""
    record.cause = episode_cause(record.outcome, record.final_return, record.last_parsed, record.last_cut)
    return record


def template_kwargs(enable_thinking: bool | None) -> dict:
    """The chat-template variables of one role (``agent.enable_thinking``, ``designer.enable_thinking``): Qwen3's
    ``enable_thinking`` when it is set, nothing when it is null (the template's own default; a template that does not
    read the variable ignores it either way)."""
    return {} if enable_thinking is None else {"enable_thinking": bool(enable_thinking)}


class ChatTokens:
    """Renders chats with the tokenizer's template and extends an episode token by token. ``kwargs`` (``template_kwargs``)
    reach every rendering: the first prompt, each continuation and each re-rendered prompt."""

    def __init__(self, tokenizer, kwargs: dict | None = None):
        self.tokenizer = tokenizer
        self.kwargs = dict(kwargs or {})
        self.eos_text = tokenizer.eos_token
        self.eos_id = tokenizer.eos_token_id
        self._support = None  # tool_calls.TemplateSupport, probed on first use

    def render(self, messages: list, add_generation_prompt: bool, tools: list | None = None) -> str:
        extra = {"tools": tools} if tools else {}  # tool schemas, rendered by the template (agent.tool_format native)
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                                  **self.kwargs, **extra)

    def encode(self, text: str) -> list:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def first_prompt(self, messages: list, tools: list | None = None) -> list:
        return self.encode(self.render(messages, add_generation_prompt=True, tools=tools))

    @property
    def support(self) -> tool_calls.TemplateSupport:
        """Whether the template renders ``tools=`` and ``tool`` messages (probed once)."""
        if self._support is None:
            self._support = tool_calls.template_support(self.tokenizer)
        return self._support

    def continuation(self, messages: list, observation: str | list, ended_with_eos: bool,
                     tools: list | None = None) -> list:
        """Tokens that follow the assistant's last turn: end of turn, the observation, the next prompt.

        ``messages`` ends with that assistant turn; ``observation`` is a ``user`` message's text or a list of
        messages (e.g. one ``tool`` message per call). The text after its end-of-turn token is taken from
        the template, so the sequence equals what the template would render, without re-tokenising
        anything the model sampled.
        """
        replies = [{"role": "user", "content": observation}] if isinstance(observation, str) else list(observation)
        closed = self.render(messages, add_generation_prompt=False, tools=tools)
        opened = self.render(messages + replies, add_generation_prompt=True, tools=tools)
        ids = [] if ended_with_eos else [self.eos_id]
        if opened.startswith(closed):
            end = closed.rfind(self.eos_text)
            glue = closed[end + len(self.eos_text) :] if end >= 0 else ""
            return ids + self.encode(glue + opened[len(closed) :])
        # the template re-renders the earlier turns once the observation follows (Qwen3 drops the <think> blocks of
        # turns before the last user message): what follows the assistant's end-of-turn before the observation is
        # still the template's own text, and the episode keeps the reply as sampled
        at = len(opened)
        for reply in reversed(replies):  # where the first new message's text starts
            at = opened.rfind(reply["content"], 0, at)
        end = opened.rfind(self.eos_text, 0, at) if at >= 0 else -1
        if end < 0:
            raise ValueError("the chat template renders neither a conversation as a prefix of its extension nor an "
                             "end-of-turn token before the new observation")
        return ids + self.encode(opened[end + len(self.eos_text) :])


@dataclass
class _Live:
    job: EpisodeJob
    record: EpisodeRecord
    messages: list
    episode: object  # SandboxedEpisode
    tools: list | None = None  # schemas the template renders (agent.tool_format native), else None


class EpisodeRunner:
    """Plays batches of episodes: the model through a backend, the environments through the sandbox."""

    def __init__(self, backend: GenerationBackend, pool: SandboxPool, config: AgentConfig, system_prompts: dict):
        self.backend, self.pool, self.config = backend, pool, config
        self.system_prompts = system_prompts  # kind -> system prompt text, or the messages before the first observation
        self.chat = ChatTokens(backend.tokenizer, template_kwargs(config.enable_thinking))
        # agent.response_prefix: its tokens follow every generation prompt; its text opens every parsed reply
        self.prefix = config.response_prefix
        self.prefix_ids = self.chat.encode(self.prefix) if self.prefix else []
        self._compiled: dict = {}  # code -> pool.precompile(code), the COMPILED_KEPT most recently used

    def compiled(self, code: str) -> str | None:
        """``code`` compiled once in this process for all its episodes (``SandboxPool.open(compiled=...)``; the
        episode process still runs it confined, and compiles it itself when this is None)."""
        if code in self._compiled:
            self._compiled[code] = self._compiled.pop(code)  # most recently used last
        else:
            while len(self._compiled) >= COMPILED_KEPT:
                del self._compiled[next(iter(self._compiled))]
            self._compiled[code] = precompile(code, self.pool.config.limits.max_request_bytes // 2)
        return self._compiled[code]

    def _start(self, job: EpisodeJob, with_hint) -> _Live | EpisodeRecord:
        record = EpisodeRecord(job.env_id, job.seed, job.arm)
        if job.own_turn_limit:
            kwargs, cap = dict(job.env_kwargs), self.config.max_turns
        else:
            kwargs, cap = {"max_turns": self.config.max_turns, **job.env_kwargs}, None
        problem = job.seed if job.reset_seed is None else job.reset_seed
        episode = self.pool.open(job.code, job.class_name, seed=problem, env_kwargs=kwargs,
                                 compiled=self.compiled(job.code), turn_cap=cap)
        outcome = episode.reset(problem) if episode.opened.ok else episode.opened
        if not outcome.ok:
            episode.close()
            record.outcome, record.failure = "env_failure", outcome.describe()
            return settle(record)
        observation, info = outcome.value
        native = self._native(job)
        tools = (info.get("tools") or None) if job.kind == "tool_use" else None
        if tools and not (native and self.chat.support.tools):  # text format, or a template that ignores tools=
            observation += tool_calls.tools_text(tools)
        if job.arm == "hint":
            observation = with_hint(observation, job.hint)
        prefix = [] if native else self.system_prompts[job.kind]  # native: no system prompt, as the reference
        messages = [{"role": "system", "content": prefix}] if isinstance(prefix, str) else [dict(m) for m in prefix]
        messages.append({"role": "user", "content": observation})
        tools = tools if native and self.chat.support.tools else None
        record.token_ids = self.chat.first_prompt(messages, tools) + self.prefix_ids
        record.loss_mask = [0] * len(record.token_ids)
        record.rollout_logprobs = [0.0] * len(record.token_ids)
        return _Live(job, record, messages, episode, tools)

    def _native(self, job: EpisodeJob) -> bool:
        """Whether ``job`` plays with the native tool-call format (agent.tool_format, tool use only)."""
        return job.kind == "tool_use" and self.config.tool_format == "native"

    def run(self, jobs: list, seed: int, with_hint=None, per_episode_seeds: bool = False) -> list:
        """Play every job; returns one ``EpisodeRecord`` per job, in order.

        ``per_episode_seeds``: turn ``t`` of a job samples with ``derive_seed(job.seed, "turn", t)``
        (per-prompt seeds), so an episode does not depend on the other jobs; evaluation uses this.
        """
        if with_hint is None:
            from spade.designer.prompts import with_hint
        started = [self._start(job, with_hint) for job in jobs]
        live = [s for s in started if isinstance(s, _Live)]
        for turn in range(self.config.max_turns):
            live = [e for e in live if not self._finished(e)]
            if not live:
                break
            self._turn(live, seed * 1_000 + turn, turn if per_episode_seeds else None)
        for entry in live:
            if not self._finished(entry):
                entry.record.outcome = "turn_limit"
        for entry in started:
            if isinstance(entry, _Live):
                entry.episode.close()
        return [settle(s.record) if isinstance(s, _Live) else s for s in started]

    def _finished(self, entry: _Live) -> bool:
        return entry.record.outcome in ENDED

    def _turn(self, live: list, seed: int, turn: int | None = None) -> None:
        budget = {id(e): self.turn_budget(e) for e in live}
        live = [e for e in live if not self._finished(e)]
        if not live:
            return
        longest = min(self.config.max_new_tokens, max(budget[id(e)] for e in live))
        params = SamplingParams(self.config.temperature, self.config.top_p, longest, top_k=self.config.top_k)
        if turn is not None:
            seed = [derive_seed(e.job.seed, "turn", turn) for e in live]
        generations = self.backend.generate([e.record.token_ids for e in live], params, seed)
        for entry, generation in zip(live, generations):
            self.absorb(entry, generation, budget[id(entry)])

    # ----- one episode at a time (pieces shared with asynchronous drivers, e.g. spade.rlhf) -------
    def start(self, job: EpisodeJob, with_hint=None) -> "_Live | EpisodeRecord":
        """Open ``job``'s environment and render its first prompt; an ``EpisodeRecord`` if it failed."""
        if with_hint is None:
            from spade.designer.prompts import with_hint
        return self._start(job, with_hint)

    def turn_budget(self, entry: _Live) -> int:
        """Tokens this episode may still add; marks it ``context_limit`` when none are left."""
        budget = self.config.max_context_tokens - len(entry.record.token_ids)
        if budget < 1:
            entry.record.outcome = "context_limit"
        return budget

    def turn_params(self, budget: int) -> SamplingParams:
        """Sampling parameters of one turn of one episode with ``budget`` tokens left."""
        return SamplingParams(self.config.temperature, self.config.top_p, min(self.config.max_new_tokens, budget),
                              top_k=self.config.top_k)

    def absorb(self, entry: _Live, generation, budget: int) -> None:
        """Append one sampled turn to the episode, step the environment, append the next observation."""
        # the batch may run past this episode's own budget
        generation = cut_to_limit(generation, budget, self.backend.tokenizer)
        ids, text = generation.completion_ids, self.prefix + generation.text  # the reply as the parser reads it
        record = entry.record
        if self.config.turn_samples == "per_turn":
            record.turn_records.append({"prompt_ids": list(record.token_ids), "output_ids": list(ids),
                                        "logprobs": list(generation.logprobs)})
        record.token_ids += ids
        record.loss_mask += [1] * len(ids)
        record.rollout_logprobs += list(generation.logprobs)
        record.generated_tokens += len(ids)
        record.turns += 1
        plan = tool_calls.plan_turn(text, self.config.tool_call_syntax) if self._native(entry.job) else None
        record.last_parsed = plan.parsed if plan else parsed_action(text, entry.job.kind) is not None
        record.last_cut = generation.finish_reason == "length"
        record.unparsed_turns += not record.last_parsed
        record.cut_turns += record.last_cut
        if record.last_cut and self.config.cut_turns == "end":  # no eos: the reply is unfinished, the episode ends
            record.outcome = "context_limit" if len(ids) >= budget else "cut_turn"
            return
        if plan and plan.malformed and ids:  # native format: a call that does not parse is not trained
            record.loss_mask[-len(ids):] = [0] * len(ids)
            if record.turn_records:
                record.turn_records[-1]["trained"] = False
        replies = self._act(entry, text, plan)
        if replies is None:  # the episode ended
            return
        entry.messages.append({"role": "assistant", "content": text})
        if self.config.turn_samples == "per_turn":  # the next prompt is the template's rendering of the chat so far
            entry.messages += replies
            prompt = self.chat.first_prompt(entry.messages, entry.tools) + self.prefix_ids
            if len(prompt) >= self.config.max_context_tokens:
                record.outcome = "context_limit"
                return
            record.token_ids, record.loss_mask, record.rollout_logprobs = prompt, [0] * len(prompt), [0.0] * len(prompt)
            return
        ended = bool(ids) and ids[-1] == self.chat.eos_id
        extra = self.chat.continuation(entry.messages, replies, ended, entry.tools) + self.prefix_ids
        entry.messages += replies
        if len(record.token_ids) + len(extra) >= self.config.max_context_tokens:
            record.outcome = "context_limit"
            return
        record.token_ids += extra
        record.loss_mask += [0] * len(extra)
        record.rollout_logprobs += [0.0] * len(extra)

    def _act(self, entry: _Live, text: str, plan: "tool_calls.TurnPlan | None") -> list | None:
        """Step the environment with one reply's actions, in order: one ``extract_action`` (games, tool_format
        text), or each action of the native ``plan``. Returns the observation messages, or None when a step
        ended the episode (its outcome and return are set)."""
        record = entry.record
        actions = plan.actions if plan else [(extract_action(text, entry.job.kind), "user")]
        replies = []
        for action, role in actions:
            outcome = entry.episode.step(action)
            if not outcome.ok:
                record.outcome, record.failure = "env_failure", outcome.describe()
                return None
            observation, reward, terminated, truncated, _ = outcome.value
            record.rewards.append(reward)
            if terminated or truncated:
                record.outcome = "terminated" if terminated else "truncated"
                record.final_return = episode_return(reward, terminated)
                record.won = is_win(reward, terminated)
                return None
            replies.append({"role": role, "content": observation})
        if plan and plan.malformed:
            replies[-1]["content"] += tool_calls.MALFORMED_NOTE
        return tool_calls.fit_roles(replies, self.chat.support) if plan else replies

    def finished(self, entry: _Live) -> bool:
        return self._finished(entry)

    def finish(self, entry: _Live) -> EpisodeRecord:
        """Close the episode's environment; an episode still running is marked ``turn_limit``."""
        if not self._finished(entry):
            entry.record.outcome = "turn_limit"
        entry.episode.close()
        return settle(entry.record)

    async def run_one(self, job: EpisodeJob, agenerate, in_thread=None, with_hint=None) -> EpisodeRecord:
        """Play one episode with an asynchronous generator (e.g. a vLLM engine behind ``spade.rlhf``).

        ``agenerate(prompt_ids, params, seed)`` is awaited once per turn and returns one ``Generation``;
        turn ``t`` samples with ``derive_seed(job.seed, "turn", t)``, as ``run(per_episode_seeds=True)``.
        ``in_thread(fn, *args)`` (default ``asyncio.to_thread``) runs the blocking sandbox calls off the
        event loop. Token bookkeeping is ``absorb``, the same as the batched ``run``.
        """
        import asyncio

        in_thread = in_thread or asyncio.to_thread
        entry = await in_thread(self.start, job, with_hint)
        if isinstance(entry, EpisodeRecord):
            return entry
        try:
            for turn in range(self.config.max_turns):
                if self._finished(entry):
                    break
                budget = self.turn_budget(entry)
                if self._finished(entry):
                    break
                generation = await agenerate(list(entry.record.token_ids), self.turn_params(budget),
                                             derive_seed(job.seed, "turn", turn))
                await in_thread(self.absorb, entry, generation, budget)
        finally:
            record = await in_thread(self.finish, entry)
        return record

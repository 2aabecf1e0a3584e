"""Validation of a candidate environment (spec section 5), run entirely through the sandbox.

Steps, each with its own reason code when it fails: intake (extract, repair, one class), load and
instantiate, ``reset`` contract, probe actions through ``step`` (types of every element, reward finite
and inside the configured range), a second seed, same-seed determinism (the same instance reset
twice and a fresh instance give the same first observation and the same probe trajectory), and for
tool-use environments the reset gate (``reset_gate``: 'lenient', the reference's, rejects only a criterion
that raises on every gate seed and is skipped at training step 0; 'strict', the paper's text, wants every
criterion to evaluate and be False on fresh states).

Three optional admission gates follow the smoke test (AutoEnvScaling, ``../shared/spec/PEERS.md``). Each
is a switch of ``ValidationConfig``, off by default, so the paper's validation is unchanged unless one is
turned on; each has its own reason code:

- ``solution_gate``: the class must define ``solution()`` (else ``no_solution``). Contract, shared with the
  designer prompts and ``spade.envs.drivers``: called right after ``reset(seed)``, it returns the
  reference actions from that state as one ``str``, one action per line; a game line is the bare
  answer (wrapped in ``\\boxed{...}`` as the agent would write it unless it already holds one), a
  tool-use line is a raw action (tool-call JSON or ``<answer>done</answer>``). The lines are replayed
  through the sandbox on every seed of ``seeds``; each episode must terminate with a final reward of at
  least ``1 - solution_tolerance`` (else ``solution_failed``).
- ``idle_gate``: do-nothing policies (``IDLE_ACTIONS``: an empty turn repeated; for tool use also an
  immediate ``<answer>done</answer>`` without any tool call) are played on every seed of ``seeds`` until
  the episode ends or ``max_turns + 1`` steps; the best episode return (spec 3.4: final reward if
  terminated, else 0) must stay below ``idle_max_return`` (else ``idle_too_high``).
- ``overlap_gate``: word n-grams of the sanitised source and of the first observations (both seeds) are
  compared with an index of held-out evaluation texts (``build_ngram_index``); for each held-out item
  the share of its distinct n-grams that also occur in the candidate is computed, and the largest share
  must stay below ``overlap_threshold`` (else ``eval_overlap``). The comparison runs on the host, on
  text that came out of the sandbox. The held-out texts come from ``overlap_texts`` and/or the file
  ``overlap_texts_path`` (``load_heldout_texts``). ``heldout_library_texts`` collects the first
  observations of the held-out library environments, and ``write_heldout_texts`` writes such a file;
  the items of another benchmark (e.g. the Reasoning Gym hard questions) can be written the same way.

The tool-use LLM screen (``llm_screen``) needs the policy, so it runs in the self-play core after these checks
(``spade.core.design``), and books its rejections here as ``screen_rejected`` / ``screen_unclear``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from spade.configtools import option
from spade.envs import intake as intake_mod
from spade.envs.drivers import as_action
from spade.io import atomic_write_json, atomic_write_text
from spade.core.rewards import episode_return
from spade.sandbox.pool import Outcome, SandboxedEpisode, SandboxPool, precompile

REASONS = intake_mod.REASONS + (
    "load_failed",  # the module or __init__ raised, timed out or crashed
    "reset_failed",  # reset() raised, timed out, crashed or broke the contract
    "step_failed",  # step() raised, timed out, crashed or broke the contract
    "reward_out_of_range",
    "nondeterministic",  # same seed, different first observation or probe trajectory
    "reset_gate_error",  # a tool-use criterion raised on a fresh state
    "reset_gate_presatisfied",  # a tool-use criterion is already True on a fresh state
    "no_solution",  # solution_gate on, but the class defines no solution()
    "solution_failed",  # solution_gate: solution() failed, or its replay did not reach reward 1
    "idle_too_high",  # idle_gate: a do-nothing policy scored idle_max_return or more
    "eval_overlap",  # overlap_gate: n-gram overlap with a held-out evaluation item reached the threshold
    "screen_rejected",  # llm_screen: the policy judged a success criterion unreachable, pre-met or underivable
    "screen_unclear",  # llm_screen with screen_unclear 'reject': the verdict was empty or unparsable
    "screen_timeout",  # llm_screen: the verdict did not come back within screen_timeout_s (reference: a failed attempt)
)
SCREEN_UNCLEAR = ("pass", "reject")  # llm_screen: an empty or unparsable verdict passes (reference) or rejects
GAME_PROBES = ("\\boxed{0}", "\\boxed{1}", "\\boxed{a}", "I am not sure.", "")
TOOL_PROBES = (
    '{"name": "no_such_tool", "arguments": {}}',
    "not a tool call",
    '<tool_call>{"name": "no_such_tool", "arguments": "{}"}</tool_call>',
)
IDLE_ACTIONS = {"game": ("",), "tool_use": ("", "<answer>done</answer>")}  # do-nothing policies (idle_gate)
WORD_RE = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class ValidationConfig:
    seeds: list = option([0, 1], "Two different seeds: the first for probes and determinism, the second for variety.")
    reward_min: float = option(0.0, "Lowest reward a step may return (spec: rewards in [0, 1]).")
    reward_max: float = option(1.0, "Highest reward a step may return.")
    game_max_turns: int = option(20, "max_turns passed to game environments' __init__.", min=1)
    tool_max_turns: int = option(30, "max_turns passed to tool-use environments' __init__.", min=1)
    reset_gate_seeds: list = option([0, 1, 2], "Seeds of the tool-use reset gate (spec section 5).")
    reset_gate: str = option(
        "lenient", "Tool-use reset gate (paper: every criterion evaluates without error and is False on fresh "
        "states). 'lenient' (reference code, synthetic_game_env.py:487-531, orchestrator.py:1139-1153): reject only "
        "when on every reset_gate_seeds seed some criterion raises; a criterion already True passes; skipped for "
        "designs at training step 0. 'strict' (the paper's text, before issue 32): reject any raise or pre-satisfied "
        "criterion on any seed, at every step.", choices=("lenient", "strict"))
    max_code_chars: int = option(200_000, "Largest raw designer output accepted by intake, characters.", min=100)
    check_determinism: bool = option(
        True, "Deviation (ours): require same-seed determinism. false = the paper's smoke test without it."
    )
    solution_gate: bool = option(
        False, "Admission gate (AutoEnvScaling; not in the paper, default off = paper behaviour): replay "
        "solution() through the sandbox on every seed of 'seeds'; it must reach reward 1. Rejects with "
        "no_solution / solution_failed.")
    solution_tolerance: float = option(
        1e-6, "solution_gate: a replay passes when it terminates with final reward >= 1 - this.", min=0.0)
    idle_gate: bool = option(
        False, "Admission gate (AutoEnvScaling; default off = paper behaviour): do-nothing policies must "
        "score below idle_max_return on every seed of 'seeds'. Rejects with idle_too_high.")
    idle_max_return: float = option(0.5, "idle_gate: the do-nothing episode return must stay below this.", min=0.0)
    overlap_gate: bool = option(
        False, "Admission gate (AutoEnvScaling; default off = paper behaviour): word n-gram overlap of the "
        "source and first observations with held-out evaluation texts must stay below overlap_threshold. "
        "Needs overlap_texts_path or overlap_texts. Rejects with eval_overlap.")
    overlap_n: int = option(13, "overlap_gate: n of the word n-grams (13 = the usual contamination check).", min=1)
    overlap_threshold: float = option(
        0.5, "overlap_gate: reject when some held-out item shares this fraction (0-1] of its distinct "
        "n-grams with the candidate.", min=0.0)
    overlap_texts_path: str = option(
        "", "overlap_gate: file of held-out texts (relative paths from the working directory, the repository "
        "root under snakemake): .jsonl (one object with a 'text' key, or one JSON string, "
        "per line), .json (a list of such items) or any other suffix (plain text, one item per non-blank line).")
    overlap_texts: list = option([], "overlap_gate: held-out texts given inline (added to overlap_texts_path's).")
    llm_screen: bool = option(
        False, "Tool-use LLM screen (paper; reference code --spade-use-env-validator, off by default and on in every "
        "tool-use script; on in the tool-use recipe): after the sandbox checks pass, the policy itself reads each "
        "tool-use candidate and must judge every success criterion reachable, not met at reset and derivable from "
        "the task (one generate call per design round, spade.core.design). Rejects with screen_rejected / "
        "screen_unclear. Games are never screened.")
    screen_temperature: float = option(0.3, "llm_screen: sampling temperature (reference code: 0.3). Top-p is the "
                                       "hint's (designer.hint_top_p), no top-k, as the reference's call.", min=0.0)
    screen_max_new_tokens: int = option(
        16384, "llm_screen: most tokens of a verdict (reference code: --spade-env-validator-max-tokens 16,384).", min=1)
    screen_timeout_s: float = option(
        0.0, "llm_screen: wall-clock seconds a verdict may take; past it the design fails (reason screen_timeout). 0 = "
        "no limit (ours before issue 40). Reference code: 120, and a timeout fails the design attempt "
        "(corpus_orchestrator.py:165-169; its own errors pass, env_validator.py:182-185); set in the tool-use recipe. "
        "Needs a backend that can stop a request (OpenRLHF's engines, the HF backend); the local vLLM backend refuses "
        "it.", min=0.0)
    screen_unclear: str = option(
        "pass", "llm_screen: what an empty or unparsable verdict does. 'pass' (reference code: it fails open) or "
        "'reject' (the paper's reading: only a judged-sound environment is kept; reason screen_unclear).",
        choices=SCREEN_UNCLEAR)

    def __post_init__(self):
        if not 0.0 < self.overlap_threshold <= 1.0:
            raise ValueError(f"overlap_threshold must lie in (0, 1], got {self.overlap_threshold!r}")
        if not all(isinstance(text, str) for text in self.overlap_texts):
            raise ValueError(f"overlap_texts must be a list of strings, got {self.overlap_texts!r}")
        if self.overlap_gate and not (self.overlap_texts_path or self.overlap_texts):
            raise ValueError("overlap_gate is on but neither overlap_texts_path nor overlap_texts names held-out texts")

    def max_turns_for(self, kind: str) -> int:
        """``max_turns`` passed to ``__init__`` for a ``game`` or ``tool_use`` environment."""
        return self.tool_max_turns if kind == "tool_use" else self.game_max_turns


@dataclass(frozen=True)
class ValidationReport:
    valid: bool
    reason: str  # "ok" or one of REASONS
    message: str  # human-readable explanation
    isolation: str  # sandbox isolation level in force
    class_name: str = ""
    kind: str = ""  # "game" or "tool_use"
    changes: tuple = ()  # what intake changed in the raw text
    checks: tuple = ()  # names of the checks that passed, in order
    code: str = field(default="", repr=False)  # the sanitised code that was validated
    code_sha256: str = ""
    elapsed_ms: float = 0.0
    screen_verdict: str = ""  # the tool-use LLM screen's verdict (spade.designer.prompts.SCREEN_VERDICTS); "" = not run

    def to_dict(self, include_code: bool = False) -> dict:
        data = asdict(self)
        data["changes"], data["checks"] = list(self.changes), list(self.checks)
        if not include_code:
            data.pop("code")
        return data


class _Reject(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


def _require(outcome: Outcome, reason: str, what: str) -> tuple | str | list:
    if not outcome.ok:
        raise _Reject(reason, f"{what}: {outcome.describe()}" + (f"\n{outcome.traceback}" if outcome.traceback else ""))
    return outcome.value


class Validator:
    """Validates candidates through a shared ``SandboxPool``."""

    def __init__(self, pool: SandboxPool, config: ValidationConfig | None = None):
        self.pool = pool
        self.config = config or ValidationConfig()
        self.overlap_index = None
        if self.config.overlap_gate:  # a bad path fails here, before any candidate is judged
            texts = list(self.config.overlap_texts)
            if self.config.overlap_texts_path:
                texts += load_heldout_texts(self.config.overlap_texts_path)
            self.overlap_index = build_ngram_index(texts, self.config.overlap_n)

    def validate(self, raw: str, step: int | None = None) -> ValidationReport:
        """Validate one candidate. ``step``: the training step it was designed at (None outside training); the
        lenient reset gate skips designs of step 0, as the reference (no fallback environment exists yet)."""
        start = time.perf_counter()
        checks: list = []
        try:
            result = intake_mod.intake(raw, max_chars=self.config.max_code_chars)
        except intake_mod.IntakeError as exc:
            return ValidationReport(False, exc.reason, exc.message, self.pool.level,
                                    elapsed_ms=(time.perf_counter() - start) * 1000)
        checks.append("intake")
        fields = dict(class_name=result.class_name, kind=result.kind, changes=result.changes, code=result.code,
                      code_sha256=hashlib.sha256(result.code.encode()).hexdigest())
        try:
            self._run_checks(result, checks, step)
        except _Reject as rejection:
            return ValidationReport(False, rejection.reason, rejection.message, self.pool.level, checks=tuple(checks),
                                    elapsed_ms=(time.perf_counter() - start) * 1000, **fields)
        message = f"valid {result.kind} environment {result.class_name!r}"
        return ValidationReport(True, "ok", message, self.pool.level, checks=tuple(checks),
                                elapsed_ms=(time.perf_counter() - start) * 1000, **fields)

    def _open(self, result, seed: int, compiled: str | None) -> SandboxedEpisode:
        max_turns = self.config.max_turns_for(result.kind)
        episode = self.pool.open(result.code, result.class_name, seed=seed, env_kwargs={"max_turns": max_turns},
                                 compiled=compiled)
        _require(episode.opened, "load_failed", f"loading and instantiating {result.class_name}")
        return episode

    def _probe(self, episode: SandboxedEpisode, seed: int, probes: tuple) -> list:
        """Reset with ``seed`` and play the probe actions; returns the trajectory for comparison."""
        observation, _ = _require(episode.reset(seed), "reset_failed", f"reset(seed={seed})")
        trajectory = [observation]
        low, high = self.config.reward_min, self.config.reward_max
        for action in probes:
            obs, reward, terminated, truncated, _ = _require(episode.step(action), "step_failed", f"step({action!r})")
            if not low <= reward <= high:
                raise _Reject("reward_out_of_range", f"step({action!r}) returned reward {reward!r}, outside [{low}, {high}]")
            trajectory.append((obs, reward, terminated, truncated))
            if terminated or truncated:
                _require(episode.reset(seed), "reset_failed", f"reset(seed={seed}) after the episode ended")
        return trajectory

    def _run_checks(self, result, checks: list, step: int | None = None) -> None:
        seed, other_seed = self.config.seeds[0], self.config.seeds[1]
        probes = TOOL_PROBES if result.kind == "tool_use" else GAME_PROBES
        # Compiled once here for every episode of this validation (intake has compiled it already).
        compiled = precompile(result.code, self.pool.config.limits.max_request_bytes // 2)
        with self._open(result, seed, compiled) as first:
            checks.append("load")
            trajectory = self._probe(first, seed, probes)
            checks.append("reset_step_contract")
            first_observations = [trajectory[0], self._probe(first, other_seed, probes[:2])[0]]
            checks.append("second_seed")
            if result.kind == "tool_use" and not (self.config.reset_gate == "lenient" and step == 0):
                self._reset_gate(first)
                checks.append("reset_gate")
            if self.config.check_determinism:
                again, _ = _require(first.reset(seed), "reset_failed", f"reset(seed={seed}) a second time")
                if again != trajectory[0]:
                    raise _Reject("nondeterministic", f"reset(seed={seed}) twice on one instance gave different observations")
        if self.config.check_determinism:
            with self._open(result, seed, compiled) as fresh:
                if self._probe(fresh, seed, probes) != trajectory:
                    raise _Reject("nondeterministic", f"a fresh instance with seed {seed} played the probes differently")
                checks.append("determinism")
        self._admission_gates(result, first_observations, checks, compiled)

    # ----- admission gates (off by default) --------------------------------------------------------
    def _admission_gates(self, result, first_observations: list, checks: list, compiled: str | None) -> None:
        cfg = self.config
        if cfg.solution_gate:
            self._solution_gate(result, compiled)
            checks.append("solution_gate")
        if cfg.idle_gate:
            self._idle_gate(result, compiled)
            checks.append("idle_gate")
        if cfg.overlap_gate:
            share, item, matched = ngram_overlap(self.overlap_index, [result.code, *first_observations])
            if share >= cfg.overlap_threshold:
                raise _Reject("eval_overlap", f"held-out item {item} shares {matched} of its distinct "
                              f"{cfg.overlap_n}-grams ({share:.0%}) with the environment's source or first "
                              f"observation; overlap_threshold is {cfg.overlap_threshold}")
            checks.append("overlap_gate")

    def _replay(self, episode: SandboxedEpisode, seed: int, kind: str, actions, reason: str, what: str) -> float:
        """Reset with ``seed``, send ``actions`` (a list, or a callable giving the list after the reset)
        until the episode ends, they run out or ``max_turns + 1`` steps; returns the episode return."""
        _require(episode.reset(seed), reason, f"{what}: reset(seed={seed})")
        if callable(actions):
            actions = actions()
        final_reward, terminated = 0.0, False
        for action in list(actions)[: self.config.max_turns_for(kind) + 1]:
            _, final_reward, terminated, truncated, _ = _require(
                episode.step(action), reason, f"{what}: step({action[:80]!r}) on seed {seed}")
            if terminated or truncated:
                break
        return episode_return(final_reward, terminated)

    def _solution_gate(self, result, compiled: str | None) -> None:
        if not defines_method(result.code, result.class_name, "solution"):
            raise _Reject("no_solution", f"solution_gate is on but {result.class_name} defines no solution() method")
        with self._open(result, self.config.seeds[0], compiled) as episode:
            for seed in self.config.seeds:
                def plan(seed=seed):
                    outcome = episode.solution()
                    if outcome.kind == "env_error" and outcome.error_type == "NotImplementedError":
                        raise _Reject("no_solution", f"{result.class_name}.solution() is not implemented: {outcome.message}")
                    text = _require(outcome, "solution_failed", f"solution() after reset(seed={seed})")
                    return [as_action(line, result.kind) for line in text.splitlines() if line.strip()]

                value = self._replay(episode, seed, result.kind, plan, "solution_failed", "replaying solution()")
                if value < 1.0 - self.config.solution_tolerance:
                    raise _Reject("solution_failed", f"replaying solution() on seed {seed} gave episode return "
                                  f"{value:.4g}; the gate needs >= 1 - {self.config.solution_tolerance:g}")

    def _idle_gate(self, result, compiled: str | None) -> None:
        turns = self.config.max_turns_for(result.kind) + 1
        with self._open(result, self.config.seeds[0], compiled) as episode:
            for seed in self.config.seeds:
                for action in IDLE_ACTIONS[result.kind]:
                    value = self._replay(episode, seed, result.kind, [action] * turns, "step_failed",
                                         "do-nothing policy")
                    if value >= self.config.idle_max_return:
                        raise _Reject("idle_too_high", f"the do-nothing policy (action {action!r} every turn) "
                                      f"scored {value:.4g} on seed {seed}; idle_max_return is {self.config.idle_max_return}")

    def _reset_gate(self, episode: SandboxedEpisode) -> None:
        """Evaluate every criterion on a fresh state of each ``reset_gate_seeds`` seed (``reset_gate``): 'strict'
        rejects the first raise or True verdict; 'lenient' (reference) rejects only when every seed has a
        criterion that raises (the same one or not), so a seed-dependent raise and a pre-satisfied criterion pass.
        A failing reset rejects in both modes."""
        strict, raised = self.config.reset_gate == "strict", []
        for seed in self.config.reset_gate_seeds:
            _require(episode.reset(seed), "reset_failed", f"reset(seed={seed}) for the reset gate")
            verdicts = _require(episode.call("reset_gate"), "reset_gate_error", f"evaluating criteria (seed {seed})")
            errors = [(index, verdict) for index, verdict in enumerate(verdicts) if isinstance(verdict, str)]
            if errors:
                raised.append(f"seed {seed}: criterion {errors[0][0]}: {errors[0][1]}")
            if not strict:
                continue
            for index, verdict in enumerate(verdicts):
                if isinstance(verdict, str):
                    raise _Reject("reset_gate_error", f"criterion {index} raised on a fresh state (seed {seed}): {verdict}")
                if verdict:
                    raise _Reject("reset_gate_presatisfied", f"criterion {index} is already True on a fresh state (seed {seed})")
        if not strict and raised and len(raised) == len(self.config.reset_gate_seeds):
            raise _Reject("reset_gate_error", "a criterion raised on a fresh state at every reset gate seed (lenient "
                          "gate): " + "; ".join(raised))


def screened(report: ValidationReport, verdict: str, reply: str, unclear: str = "pass",
             reply_chars: int = 1000) -> ValidationReport:
    """``report`` of a candidate that passed the sandbox checks, after the tool-use LLM screen's ``verdict`` on it
    (``llm_screen``): 'pass' keeps it valid; 'reject' rejects it (``screen_rejected``); 'empty' and 'garbage' keep it
    valid with ``unclear`` 'pass' (the reference fails open) and reject it (``screen_unclear``) with 'reject'. A
    rejection's message ends with the last ``reply_chars`` characters of the screen's ``reply``."""
    if unclear not in SCREEN_UNCLEAR:
        raise ValueError(f"validation.screen_unclear must be one of {SCREEN_UNCLEAR}, got {unclear!r}")
    if verdict not in ("pass", "reject", "empty", "garbage"):
        raise ValueError(f"unknown screen verdict {verdict!r}; known: pass, reject, empty, garbage")
    if verdict == "pass" or (verdict != "reject" and unclear == "pass"):
        return replace(report, checks=(*report.checks, "llm_screen"), screen_verdict=verdict)
    reason = "screen_rejected" if verdict == "reject" else "screen_unclear"
    what = {"reject": "judged a success criterion unreachable, already met at reset or underivable",
            "empty": "gave an empty verdict", "garbage": "gave no \\boxed{yes} or \\boxed{no} verdict"}[verdict]
    tail = reply.strip()[-reply_chars:]
    return replace(report, valid=False, reason=reason, screen_verdict=verdict,
                   message=f"the policy's LLM screen {what} (validation.llm_screen); its reply ends:\n{tail}")


def screen_timed_out(report: ValidationReport, seconds: float) -> ValidationReport:
    """``report`` of a candidate whose LLM-screen verdict did not come back within ``seconds``
    (``screen_timeout_s``): rejected, as the reference's timed-out validator call fails the attempt."""
    return replace(report, valid=False, reason="screen_timeout", screen_verdict="timeout",
                   message=f"the policy's LLM screen gave no verdict within {seconds:g} s "
                           f"(validation.screen_timeout_s); the design attempt fails")


def store_rejection(folder: str | Path, raw: str, report: ValidationReport, extra: dict | None = None) -> Path:
    """Keep a rejected candidate on disk: ``<folder>/<sha12>/{raw.txt, code.py, report.json}``; ``extra`` adds
    keys to report.json (the self-play core adds whether the text was cut and its failing stage)."""
    digest = hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:12]
    target = Path(folder) / digest
    atomic_write_text(target / "raw.txt", raw)
    if report.code:
        atomic_write_text(target / "code.py", report.code)
    atomic_write_json(target / "report.json", {**report.to_dict(), **(extra or {})})
    return target


# ----- helpers of the admission gates ----------------------------------------------------------------
def defines_method(code: str, class_name: str, method: str) -> bool:
    """Whether class ``class_name`` of ``code``, or a base class defined in the same module, defines
    ``method`` (a ``def`` in the class body). Bases imported from elsewhere (e.g. ``ToolUseBaseEnv``,
    whose ``solution`` only raises NotImplementedError) do not count."""
    classes = {node.name: node for node in ast.parse(code).body if isinstance(node, ast.ClassDef)}
    seen: set = set()
    todo = [class_name]
    while todo:
        name = todo.pop()
        if name in seen or name not in classes:
            continue
        seen.add(name)
        node = classes[name]
        if any(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == method for item in node.body):
            return True
        todo += [base.id for base in node.bases if isinstance(base, ast.Name)]
    return False


def words(text: str) -> list:
    """Lower-cased alphanumeric words of ``text`` (punctuation and underscores separate words)."""
    return WORD_RE.findall(text.lower())


def ngrams(text: str, n: int) -> set:
    """The distinct word ``n``-grams of ``text``, each as one space-joined string."""
    tokens = words(text)
    return {" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


@dataclass(frozen=True)
class NgramIndex:
    """Held-out items by n-gram: ``postings`` maps an n-gram to the ids of items holding it; ``sizes[i]``
    is item i's number of distinct n-grams (items shorter than n words have none and never match)."""

    n: int
    postings: dict
    sizes: tuple


def build_ngram_index(texts, n: int = 13) -> NgramIndex:
    """Index the distinct word ``n``-grams of each held-out text (see ``ngrams``)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}")
    postings: dict = {}
    sizes = []
    for item, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"held-out text {item} must be a string, got {type(text).__name__}")
        grams = ngrams(text, n)
        sizes.append(len(grams))
        for gram in grams:
            postings.setdefault(gram, []).append(item)
    if not any(sizes):
        raise ValueError(f"no held-out text has {n} words or more: the overlap index would be empty")
    return NgramIndex(n, postings, tuple(sizes))


def ngram_overlap(index: NgramIndex, texts) -> tuple[float, int, int]:
    """Largest share of a held-out item's distinct n-grams found in ``texts`` (a string or strings,
    pooled). Returns (share, item id, matched n-grams); (0.0, -1, 0) when nothing matches."""
    grams = set()
    for text in [texts] if isinstance(texts, str) else texts:
        grams |= ngrams(text, index.n)
    hits: dict = {}
    for gram in grams:
        for item in index.postings.get(gram, ()):
            hits[item] = hits.get(item, 0) + 1
    best = (0.0, -1, 0)
    for item, count in sorted(hits.items()):
        share = count / index.sizes[item]
        if share > best[0]:
            best = (share, item, count)
    return best


def load_heldout_texts(path: str | Path) -> list:
    """Held-out texts for the overlap gate (``validation.overlap_texts_path``): ``.jsonl`` (per line an
    object with a ``text`` key, or a JSON string), ``.json`` (a list of such items), anything else plain
    text with one item per non-blank line."""
    target = Path(path)
    if not target.is_file():
        raise ValueError(f"validation.overlap_texts_path {str(path)!r} is not a file")
    raw = target.read_text(encoding="utf-8")
    if target.suffix == ".jsonl":
        items = [json.loads(line) for line in raw.splitlines() if line.strip()]
    elif target.suffix == ".json":
        items = json.loads(raw)
        if not isinstance(items, list):
            raise ValueError(f"{path}: a .json held-out file must hold a list, got {type(items).__name__}")
    else:
        return [line for line in raw.splitlines() if line.strip()]
    texts = []
    for i, item in enumerate(items):
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise ValueError(f"{path}: item {i} must be a string or an object with a string 'text', got {item!r:.80}")
        texts.append(text)
    return texts


def write_heldout_texts(path: str | Path, texts) -> Path:
    """Write held-out texts as ``.jsonl`` (``{"text": ...}`` per line, atomically) for ``overlap_texts_path``.
    E.g. the questions of the Reasoning Gym hard split or the first observations of the held-out library."""
    rows = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"held-out text {i} must be a string, got {type(text).__name__}")
        rows.append(json.dumps({"text": text}))
    atomic_write_text(Path(path), "\n".join(rows) + "\n")
    return Path(path)


def heldout_library_texts(pool: SandboxPool, names, seeds, config: ValidationConfig | None = None) -> list:
    """First observations of built-in library environments ``names`` (e.g. ``eval.heldout_library.environments``)
    on every seed of ``seeds``, played through the sandbox: held-out texts for the overlap gate. Write them
    with ``write_heldout_texts`` and point ``validation.overlap_texts_path`` at the file."""
    from spade.envs.library.registry import (
        get_env,  # not at module level: the library check imports this module
    )

    config = config or ValidationConfig()
    texts = []
    for name in names:
        result = intake_mod.intake(get_env(name).source(), max_chars=config.max_code_chars)
        with pool.open(result.code, result.class_name, seed=None,
                       env_kwargs={"max_turns": config.max_turns_for(result.kind)}) as episode:
            _require_plain(episode.opened, f"loading library environment {name!r}")
            for seed in seeds:
                observation, _ = _require_plain(episode.reset(seed), f"{name}: reset(seed={seed})")
                texts.append(observation)
    return texts


def _require_plain(outcome: Outcome, what: str):
    if not outcome.ok:
        raise RuntimeError(f"{what}: {outcome.describe()}")
    return outcome.value

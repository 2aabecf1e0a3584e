"""Validation of a candidate environment (spec section 5), run entirely through the sandbox.

Steps, each with its own reason code when it fails: intake (extract, repair, one class), load and
instantiate, ``reset`` contract, probe actions through ``step`` (types of every element, reward finite
and inside the configured range), a second seed, same-seed determinism (the same instance reset
twice and a fresh instance give the same first observation and the same probe trajectory), and for
tool-use environments the reset gate (every criterion evaluates and is False on fresh states).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spade.configtools import option
from spade.envs import intake as intake_mod
from spade.io import atomic_write_json, atomic_write_text
from spade.sandbox.pool import Outcome, SandboxedEpisode, SandboxPool

REASONS = intake_mod.REASONS + (
    "load_failed",  # the module or __init__ raised, timed out or crashed
    "reset_failed",  # reset() raised, timed out, crashed or broke the contract
    "step_failed",  # step() raised, timed out, crashed or broke the contract
    "reward_out_of_range",
    "nondeterministic",  # same seed, different first observation or probe trajectory
    "reset_gate_error",  # a tool-use criterion raised on a fresh state
    "reset_gate_presatisfied",  # a tool-use criterion is already True on a fresh state
)
GAME_PROBES = ("\\boxed{0}", "\\boxed{1}", "\\boxed{a}", "I am not sure.", "")
TOOL_PROBES = (
    '{"name": "no_such_tool", "arguments": {}}',
    "not a tool call",
    '<tool_call>{"name": "no_such_tool", "arguments": "{}"}</tool_call>',
)


@dataclass(frozen=True)
class ValidationConfig:
    seeds: list = option([0, 1], "Two different seeds: the first for probes and determinism, the second for variety.")
    reward_min: float = option(0.0, "Lowest reward a step may return (spec: rewards in [0, 1]).")
    reward_max: float = option(1.0, "Highest reward a step may return.")
    game_max_turns: int = option(20, "max_turns passed to game environments' __init__.", min=1)
    tool_max_turns: int = option(30, "max_turns passed to tool-use environments' __init__.", min=1)
    reset_gate_seeds: list = option([0, 1, 2], "Seeds of the tool-use reset gate (spec section 5).")
    max_code_chars: int = option(200_000, "Largest raw designer output accepted by intake, characters.", min=100)
    check_determinism: bool = option(
        True, "Deviation (ours): require same-seed determinism. false = the paper's smoke test without it."
    )

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

    def validate(self, raw: str) -> ValidationReport:
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
            self._run_checks(result, checks)
        except _Reject as rejection:
            return ValidationReport(False, rejection.reason, rejection.message, self.pool.level, checks=tuple(checks),
                                    elapsed_ms=(time.perf_counter() - start) * 1000, **fields)
        message = f"valid {result.kind} environment {result.class_name!r}"
        return ValidationReport(True, "ok", message, self.pool.level, checks=tuple(checks),
                                elapsed_ms=(time.perf_counter() - start) * 1000, **fields)

    def _open(self, result, seed: int) -> SandboxedEpisode:
        max_turns = self.config.max_turns_for(result.kind)
        episode = self.pool.open(result.code, result.class_name, seed=seed, env_kwargs={"max_turns": max_turns})
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

    def _run_checks(self, result, checks: list) -> None:
        seed, other_seed = self.config.seeds[0], self.config.seeds[1]
        probes = TOOL_PROBES if result.kind == "tool_use" else GAME_PROBES
        with self._open(result, seed) as first:
            checks.append("load")
            trajectory = self._probe(first, seed, probes)
            checks.append("reset_step_contract")
            self._probe(first, other_seed, probes[:2])
            checks.append("second_seed")
            if result.kind == "tool_use":
                self._reset_gate(first)
                checks.append("reset_gate")
            if not self.config.check_determinism:
                return
            again, _ = _require(first.reset(seed), "reset_failed", f"reset(seed={seed}) a second time")
            if again != trajectory[0]:
                raise _Reject("nondeterministic", f"reset(seed={seed}) twice on one instance gave different observations")
        with self._open(result, seed) as fresh:
            if self._probe(fresh, seed, probes) != trajectory:
                raise _Reject("nondeterministic", f"a fresh instance with seed {seed} played the probes differently")
            checks.append("determinism")

    def _reset_gate(self, episode: SandboxedEpisode) -> None:
        for seed in self.config.reset_gate_seeds:
            _require(episode.reset(seed), "reset_failed", f"reset(seed={seed}) for the reset gate")
            verdicts = _require(episode.call("reset_gate"), "reset_gate_error", f"evaluating criteria (seed {seed})")
            for index, verdict in enumerate(verdicts):
                if isinstance(verdict, str):
                    raise _Reject("reset_gate_error", f"criterion {index} raised on a fresh state (seed {seed}): {verdict}")
                if verdict:
                    raise _Reject("reset_gate_presatisfied", f"criterion {index} is already True on a fresh state (seed {seed})")


def store_rejection(folder: str | Path, raw: str, report: ValidationReport) -> Path:
    """Keep a rejected candidate on disk: ``<folder>/<sha12>/{raw.txt, code.py, report.json}``."""
    digest = hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:12]
    target = Path(folder) / digest
    atomic_write_text(target / "raw.txt", raw)
    if report.code:
        atomic_write_text(target / "code.py", report.code)
    atomic_write_json(target / "report.json", report.to_dict())
    return target

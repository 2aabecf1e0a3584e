"""Admission checks C1-C3 (after VHD-Play) for rendered mechanism environments, run through our sandbox.

Three drivers play scripted action lines (each wrapped in ``\\boxed{...}``): ``optimal`` (the reference
solver's plan), ``default`` (the greedy default policy) and ``idle`` (``finish`` at once: commit
nothing). Every driver is replayed ``replays`` times, each time in a fresh sandboxed instance reset
with the same seed.

- C1: no call raises, times out or breaks the contract, and every replay ends with ``terminated``
  before its actions run out (reasons ``c1_exception``, ``c1_no_terminal``).
- C2: the default driver's normalised score lies in ``[default_min, default_max]``
  (``c2_default_out_of_region``); the idle driver scores at most ``idle_max`` (``c2_idle_scores``).
- C3: the optimal driver's score is 1 and its utility equals ``u*`` within ``tolerance``
  (``c3_optimal_not_reproduced``); all replays of a driver agree exactly (``c3_replay_mismatch``); no
  utility exceeds ``u*`` (``c3_exceeds_optimum``); where a reference ``u*`` is given, the environment
  reports the same one (``c3_reference_mismatch``); the environment's own ``solution()`` replayed from
  a fresh reset also scores 1 (``c3_solution_mismatch``).

Before the drivers run, the source passes our validator (``spade.envs.validate``); a failure gives
``invalid`` and the validator's reason in the message.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from spade.configtools import option
from spade.envs.drivers import as_action, play_oracle
from spade.envs.intake import IntakeError, intake
from spade.envs.mechanisms.base import MechanismInstance
from spade.envs.sandboxed import EpisodeFailed, SandboxedEnv
from spade.envs.validate import ValidationConfig, Validator
from spade.sandbox.pool import SandboxPool

REASONS = (
    "invalid",
    "c1_exception",
    "c1_no_terminal",
    "c2_default_out_of_region",
    "c2_idle_scores",
    "c3_optimal_not_reproduced",
    "c3_replay_mismatch",
    "c3_exceeds_optimum",
    "c3_reference_mismatch",
    "c3_solution_mismatch",
)
DRIVERS = ("optimal", "default", "idle")


@dataclass(frozen=True)
class AdmissionConfig:
    replays: int = option(2, "Fresh-state replays of every driver; all must agree.", min=1)
    seed: int = option(0, "Seed passed to reset() in every replay.")
    tolerance: float = option(1e-6, "Absolute tolerance on utilities and scores.", min=0.0)
    default_min: float = option(0.0, "Lowest admissible normalised score of the default driver (C2).")
    default_max: float = option(0.05, "Highest admissible normalised score of the default driver (C2).")
    idle_max: float = option(0.0, "Highest admissible normalised score of the idle driver.")
    validate: bool = option(True, "Run spade.envs.validate on the source first.")
    check_solution: bool = option(True, "Also replay the environment's own solution() (must score 1).")


@dataclass(frozen=True)
class Replay:
    driver: str
    replay: int
    steps: int
    terminated: bool
    truncated: bool
    reward: float  # final-step reward (the normalised score when terminated)
    utility: float | None  # from the terminal info; None when absent
    u_star: float | None
    error: str = ""


@dataclass(frozen=True)
class AdmissionReport:
    admitted: bool
    reasons: tuple  # codes from REASONS; empty when admitted
    message: str
    replays: tuple = ()
    validation_reason: str = "ok"
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["reasons"], data["replays"] = list(self.reasons), [asdict(r) for r in self.replays]
        return data


def drivers_for(instance: MechanismInstance, presentation: str = "agentic") -> dict:
    """The three admission drivers of a solved instance: name -> action lines. In the 'written_out'
    presentation the whole decision list is one action (its lines joined with '; ')."""
    drivers = {"optimal": list(instance.optimal_actions), "default": list(instance.default_actions), "idle": ["finish"]}
    if presentation == "written_out":
        drivers = {name: ["; ".join(lines)] for name, lines in drivers.items()}
    return drivers


def _replay(pool, code, class_name, max_turns, driver, index, actions, seed) -> Replay:
    steps, terminated, truncated, reward, info = 0, False, False, 0.0, {}
    try:
        with SandboxedEnv(pool, code, class_name, "game", max_turns) as env:
            env.reset(seed)
            for line in actions:
                _, reward, terminated, truncated, info = env.step(as_action(line, "game"))
                steps += 1
                if terminated or truncated:
                    break
    except EpisodeFailed as exc:
        return Replay(driver, index, steps, False, False, 0.0, None, None, error=str(exc))
    utility, u_star = info.get("utility"), info.get("u_star")
    return Replay(driver, index, steps, terminated, truncated, float(reward),
                  None if utility is None else float(utility), None if u_star is None else float(u_star))


def admit(env_source: str, drivers: dict, pool: SandboxPool, config: AdmissionConfig | None = None,
          reference_u_star: float | None = None, validation: ValidationConfig | None = None) -> AdmissionReport:
    """Run C1-C3 on ``env_source`` with ``drivers`` (must name 'optimal', 'default' and 'idle')."""
    config = config or AdmissionConfig()
    missing = [name for name in DRIVERS if name not in drivers]
    if missing:
        raise ValueError(f"admission drivers {missing} are missing; required: {list(DRIVERS)}, got {sorted(drivers)}")
    validator = Validator(pool, validation or ValidationConfig())
    if config.validate:
        report = validator.validate(env_source)
        if not report.valid:
            return AdmissionReport(False, ("invalid",), f"validation failed ({report.reason}): {report.message}",
                                   validation_reason=report.reason)
        code, class_name = report.code, report.class_name
    else:
        try:
            result = intake(env_source)
        except IntakeError as exc:
            return AdmissionReport(False, ("invalid",), exc.message, validation_reason=exc.reason)
        code, class_name = result.code, result.class_name
    max_turns = validator.config.max_turns_for("game")
    tol = config.tolerance
    replays, reasons, notes = [], [], []

    def fail(reason, note):
        if reason not in reasons:
            reasons.append(reason)
        notes.append(note)

    by_driver = {}
    for name in DRIVERS:
        runs = [_replay(pool, code, class_name, max_turns, name, i, drivers[name], config.seed)
                for i in range(config.replays)]
        replays += runs
        by_driver[name] = runs
        for run in runs:
            if run.error:
                fail("c1_exception", f"{name} replay {run.replay}: {run.error}")
            elif not run.terminated:
                fail("c1_no_terminal", f"{name} replay {run.replay} ended after {run.steps} steps without terminating")
        key = lambda r: (r.steps, r.terminated, r.truncated, r.reward, r.utility, r.u_star)
        if len({key(r) for r in runs}) > 1:
            fail("c3_replay_mismatch", f"{name} replays disagree: {[key(r) for r in runs]}")
    if not reasons:
        u_star = by_driver["optimal"][0].u_star
        if u_star is None or any(r.utility is None for r in replays):
            fail("c3_optimal_not_reproduced", "terminal info lacks 'utility' or 'u_star'")
        else:
            if reference_u_star is not None and abs(u_star - reference_u_star) > tol:
                fail("c3_reference_mismatch", f"environment u* {u_star} != reference u* {reference_u_star}")
            optimal = by_driver["optimal"][0]
            if abs(optimal.reward - 1.0) > tol or abs(optimal.utility - u_star) > tol:
                fail("c3_optimal_not_reproduced", f"optimal driver: score {optimal.reward}, utility {optimal.utility}, u* {u_star}")
            for run in replays:
                if run.utility > u_star + tol:
                    fail("c3_exceeds_optimum", f"{run.driver} utility {run.utility} exceeds u* {u_star}")
            default = by_driver["default"][0].reward
            if not config.default_min - tol <= default <= config.default_max + tol:
                fail("c2_default_out_of_region", f"default score {default} outside [{config.default_min}, {config.default_max}]")
            idle = by_driver["idle"][0].reward
            if idle > config.idle_max + tol:
                fail("c2_idle_scores", f"idle score {idle} > {config.idle_max}")
    if not reasons and config.check_solution:
        try:
            with SandboxedEnv(pool, code, class_name, "game", max_turns) as env:
                own = play_oracle(env, config.seed, "game")
        except EpisodeFailed as exc:
            fail("c1_exception", f"solution() replay: {exc}")
        else:
            if not own.terminated or abs(own.rewards[-1] - 1.0) > tol:
                fail("c3_solution_mismatch", f"solution() replay ended with rewards {own.rewards}")
    message = "admitted" if not reasons else "; ".join(notes)
    return AdmissionReport(not reasons, tuple(reasons), message, tuple(replays))


def admit_instance(instance: MechanismInstance, pool: SandboxPool, presentation: str = "agentic",
                   config: AdmissionConfig | None = None) -> AdmissionReport:
    """Render ``instance`` and admit it with its own drivers and its reference u*."""
    from spade.envs.mechanisms.render import render

    return admit(render(instance, presentation), drivers_for(instance, presentation), pool, config,
                 reference_u_star=instance.u_star)

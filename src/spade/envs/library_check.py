"""Check every built-in environment through the sandbox: validation, oracle replay, random policy."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from spade.configtools import option
from spade.envs.drivers import play_oracle, play_random
from spade.envs.library.registry import LibraryEnv, library
from spade.envs.sandboxed import EpisodeFailed, SandboxedEnv
from spade.envs.validate import Validator


@dataclass(frozen=True)
class LibraryCheckConfig:
    oracle_seeds: int = option(5, "Seeds 0..N-1 on which the replayed solution() must win every episode.", min=1)
    random_seeds: int = option(20, "Seeds 0..N-1 played by the random policy.", min=1)
    max_random_win_rate: float = option(0.25, "An environment the random policy wins more often than this fails.", min=0.0)


@dataclass(frozen=True)
class LibraryRow:
    name: str
    skill: str
    flavour: str
    hidden_state: bool
    valid: bool
    reason: str  # validation reason code ("ok" when valid)
    oracle_win_rate: float  # over oracle_seeds episodes; must be 1.0
    random_win_rate: float  # over random_seeds episodes
    random_mean_return: float
    partial_returns: int  # random-policy episodes that ended with 0 < return < 1
    passed: bool
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


def _rates(results) -> tuple[float, float, int]:
    wins = sum(r.won for r in results)
    returns = [r.final_return for r in results]
    partial = sum(0.0 < value < 1.0 for value in returns)
    return wins / len(results), sum(returns) / len(returns), partial


def check_entry(entry: LibraryEnv, validator: Validator, config: LibraryCheckConfig) -> LibraryRow:
    report = validator.validate(entry.source())
    base = dict(name=entry.name, skill=entry.skill, flavour=entry.flavour, hidden_state=entry.hidden_state,
                valid=report.valid, reason=report.reason)
    if not report.valid:
        return LibraryRow(**base, oracle_win_rate=0.0, random_win_rate=0.0, random_mean_return=0.0,
                          partial_returns=0, passed=False, message=report.message)
    kind = report.kind
    try:
        max_turns = validator.config.max_turns_for(kind)
        with SandboxedEnv(validator.pool, report.code, report.class_name, kind, max_turns) as env:
            oracle = [play_oracle(env, seed, kind) for seed in range(config.oracle_seeds)]
            random_runs = [play_random(env, seed, kind) for seed in range(config.random_seeds)]
    except EpisodeFailed as exc:
        return LibraryRow(**base, oracle_win_rate=0.0, random_win_rate=0.0, random_mean_return=0.0,
                          partial_returns=0, passed=False, message=f"episode failed: {exc}")
    oracle_rate, _, _ = _rates(oracle)
    random_rate, random_mean, partial = _rates(random_runs)
    problems = []
    if oracle_rate < 1.0:
        problems.append(f"oracle won only {oracle_rate:.0%} of {config.oracle_seeds} episodes")
    if random_rate > config.max_random_win_rate:
        problems.append(f"random policy won {random_rate:.0%} (> {config.max_random_win_rate:.0%})")
    return LibraryRow(**base, oracle_win_rate=oracle_rate, random_win_rate=random_rate,
                      random_mean_return=random_mean, partial_returns=partial, passed=not problems,
                      message="; ".join(problems) or "ok")


def check_library(validator: Validator, config: LibraryCheckConfig, progress: bool = True) -> list[LibraryRow]:
    from rich.progress import track

    entries = library()
    iterator = track(entries, description="checking library", transient=True) if progress else entries
    return [check_entry(entry, validator, config) for entry in iterator]


def to_markdown(payload: dict) -> str:
    """A Markdown report of a ``check_library`` run (the payload written by ``spade env check-library``)."""
    rows = payload["environments"]
    passed = sum(r["passed"] for r in rows)
    lines = [
        "# Built-in environment library check",
        "",
        f"Sandbox isolation: `{payload['isolation']}`. {passed} of {len(rows)} environments pass "
        "(valid, solution replay wins every oracle seed, random policy mostly loses).",
        "",
        "| environment | skill | flavour | hidden state | valid | oracle win rate | random win rate "
        "| random mean return | partial returns | status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        status = "pass" if r["passed"] else f"FAIL: {r['message']}"
        lines.append(
            f"| {r['name']} | {r['skill']} | {r['flavour']} | {'yes' if r['hidden_state'] else 'no'} "
            f"| {'yes' if r['valid'] else 'no (' + r['reason'] + ')'} | {r['oracle_win_rate']:.2f} "
            f"| {r['random_win_rate']:.2f} | {r['random_mean_return']:.3f} | {r['partial_returns']} | {status} |"
        )
    return "\n".join(lines) + "\n"

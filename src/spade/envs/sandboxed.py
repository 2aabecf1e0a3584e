"""A plain ``reset``/``step``/``solution`` interface over a sandboxed episode, for drivers and wrappers.

Unlike ``SandboxedEpisode`` (which returns an ``Outcome`` for every call), ``SandboxedEnv`` returns the
values directly and raises ``EpisodeFailed`` (carrying the ``Outcome``) when a call does not succeed.
"""

from __future__ import annotations

from spade.envs.intake import intake
from spade.envs.validate import ValidationConfig
from spade.sandbox.pool import Outcome, SandboxPool


class EpisodeFailed(RuntimeError):
    def __init__(self, method: str, outcome: Outcome):
        super().__init__(f"{method}: {outcome.describe()}")
        self.method, self.outcome = method, outcome


class SandboxedEnv:
    """One environment instance living in the sandbox; recreated on ``reset`` if its process ended."""

    def __init__(self, pool: SandboxPool, code: str, class_name: str, kind: str = "game", max_turns: int = 20):
        self.pool, self.code, self.class_name, self.kind = pool, code, class_name, kind
        self.max_turns = max_turns
        self.episode = None

    @classmethod
    def from_source(cls, pool: SandboxPool, raw: str, max_turns: int | None = None) -> "SandboxedEnv":
        """Intake ``raw`` designer output; ``max_turns`` defaults to the validation setting for its kind."""
        result = intake(raw)
        turns = max_turns or ValidationConfig().max_turns_for(result.kind)
        return cls(pool, result.code, result.class_name, result.kind, turns)

    def _ensure(self, seed) -> None:
        if self.episode is None or self.episode.closed:
            self.episode = self.pool.open(self.code, self.class_name, seed=seed, env_kwargs={"max_turns": self.max_turns})
            if not self.episode.opened.ok:
                raise EpisodeFailed("open", self.episode.opened)

    def _value(self, method: str, outcome: Outcome):
        if not outcome.ok:
            raise EpisodeFailed(method, outcome)
        return outcome.value

    def reset(self, seed=None):
        self._ensure(seed)
        return self._value("reset", self.episode.reset(seed))

    def step(self, action: str):
        self._ensure(None)
        return self._value("step", self.episode.step(action))

    def solution(self) -> str:
        self._ensure(None)
        return self._value("solution", self.episode.solution())

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

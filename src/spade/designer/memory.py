"""The environment memory (spec section 7): past environments annotated with the agent's win rate and
the designer's regret, used to pick examples for design prompts.

- At most ``cap`` records (200); adding one more evicts the oldest (insertion order). Re-adding an
  ``env_id`` replaces its record and makes it the newest.
- ``positive_seeds``: up to n environments of the same skill whose win rate lies in the band
  [0.15, 0.85], drawn at random from the top max(3n, 10) of them by regret.
- ``negative_seed``: one environment the agent (almost) always or never won (win rate > 0.9 or
  < 0.1), of the same skill when one exists, else of any skill of the same family (games or tool use:
  showing a game to a tool-use designer would not help).
- ``examples``: how the design prompt shows them (spade.designer.prompts ``_seed_section``): by default, as
  the reference code, positives cut to ``example_chars`` under a win-rate/regret header and the negative
  named only; 'full' shows the whole code of both. The memory itself always keeps the whole code.
- Built-in library environments can seed the memory (``seed_from_library``). Their win rate and
  regret are unknown and stored as ``None``. Rule (ours): records with an unknown win rate never enter
  the band, so they are used as positive seeds only for a skill that has *no* measured record inside
  the band; they are never negative seeds. Measured records inside the band whose regret is unknown
  rank below every record with a regret.
- ``save``/``load``: JSON, written atomically; a round trip reproduces every record exactly.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from spade.configtools import ConfigError, option
from spade.designer.skills import SKILLS, skill_kind
from spade.io import atomic_write_json

__all__ = ["EnvironmentMemory", "MemoryConfig", "MemoryRecord", "LIBRARY_STEP", "MEMORY_FORMAT"]

LIBRARY_STEP = -1  # the ``step`` of records seeded from the built-in library
MEMORY_FORMAT = 1


@dataclass(frozen=True)
class MemoryConfig:
    enabled: bool = option(True, "Show memory seeds in design prompts; false = the 'w/o memory' ablation.")
    cap: int = option(200, "Most environments kept; the oldest is evicted first.", min=1)
    n_positive: int = option(2, "Positive seeds (good examples) per design prompt.", min=0)
    pool_factor: int = option(3, "Positive seeds are drawn from the top max(pool_factor * n, pool_min) by regret.", min=1)
    pool_min: int = option(10, "Smallest pool of top-regret candidates for positive seeds.", min=1)
    band_low: float = option(0.15, "Lowest win rate of a positive seed.", min=0.0)
    band_high: float = option(0.85, "Highest win rate of a positive seed.", min=0.0)
    negative_low: float = option(0.1, "A win rate below this makes an environment a negative example (too hard).", min=0.0)
    negative_high: float = option(0.9, "A win rate above this makes an environment a negative example (too easy).", min=0.0)
    seed_library: bool = option(True, "Initialise the memory with the built-in library environments.")
    win_rate: str = option(
        "regen_positive", "What a memory record stores as the agent's win rate (paper silent). 'regen_positive' "
        "(reference code): the share of the regeneration step's no-hint plays with a return > 0. 'window_win' (before "
        "issue 14): the share of full wins (return >= 1 - 1e-6) over the environment's whole k-step window. The two "
        "agree on 0/1 returns measured at the regeneration step.", choices=("regen_positive", "window_win"))
    examples: str = option(
        "reference", "How memory examples appear in a design prompt (paper silent). 'reference' (reference code, "
        "env_memory.py): each positive under a header with its skill, win rate and hint regret, its code cut to "
        "example_chars characters; the negative named (its class) with why it failed, no code. 'full' (before issue "
        "32): the whole code of both.", choices=("reference", "full"))
    example_chars: int = option(
        2000, "'reference' examples: characters of a positive example's code shown (reference code: 2,000).", min=1)

    def __post_init__(self):
        if not self.band_low <= self.band_high <= 1.0:
            raise ConfigError(
                f"config keys 'memory.band_low'/'memory.band_high' must satisfy 0 <= low <= high <= 1, "
                f"got {self.band_low!r}/{self.band_high!r}"
            )
        if not self.negative_low <= self.negative_high <= 1.0:
            raise ConfigError(
                f"config keys 'memory.negative_low'/'memory.negative_high' must satisfy 0 <= low <= high <= 1, "
                f"got {self.negative_low!r}/{self.negative_high!r}"
            )


@dataclass(frozen=True)
class MemoryRecord:
    env_id: str
    code: str
    skill: str
    flavour: str
    win_rate: float | None  # RA win rate as memory.win_rate defines it; None = not measured (library)
    regret: float | None  # hint regret r_D (raw, before flooring); None = not measured
    step: int  # training step at which the environment was made (LIBRARY_STEP for library seeds)

    def __post_init__(self):
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError(f"memory record env_id must be a non-empty string, got {self.env_id!r}")
        if self.skill not in SKILLS:
            raise ValueError(f"memory record {self.env_id!r}: unknown skill {self.skill!r}")
        if self.win_rate is not None and not (
            isinstance(self.win_rate, (int, float)) and 0.0 <= self.win_rate <= 1.0
        ):
            raise ValueError(f"memory record {self.env_id!r}: win_rate must be in [0, 1] or None, got {self.win_rate!r}")
        if self.regret is not None and not (isinstance(self.regret, (int, float)) and math.isfinite(self.regret)):
            raise ValueError(f"memory record {self.env_id!r}: regret must be a finite number or None, got {self.regret!r}")

    @property
    def measured(self) -> bool:
        return self.win_rate is not None

    def to_dict(self) -> dict:
        return asdict(self)


class EnvironmentMemory:
    """Bounded, insertion-ordered store of past environments (see the module docstring for the rules)."""

    def __init__(self, config: MemoryConfig | None = None):
        self.config = config or MemoryConfig()
        self._records: list[MemoryRecord] = []

    # ----- content ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self):
        return iter(list(self._records))

    @property
    def records(self) -> tuple:
        """All records, oldest first."""
        return tuple(self._records)

    def get(self, env_id: str) -> MemoryRecord | None:
        return next((r for r in self._records if r.env_id == env_id), None)

    def add(self, record: MemoryRecord) -> list[MemoryRecord]:
        """Store ``record`` as the newest (replacing a record with the same env_id); return the
        records evicted to respect the cap, oldest first."""
        if not isinstance(record, MemoryRecord):
            raise TypeError(f"EnvironmentMemory.add takes a MemoryRecord, got {type(record).__name__}")
        self._records = [r for r in self._records if r.env_id != record.env_id]
        self._records.append(record)
        evicted = []
        while len(self._records) > self.config.cap:
            evicted.append(self._records.pop(0))
        return evicted

    def seed_from_library(self, entries) -> int:
        """Add built-in environments (objects with ``name``, ``skill``, ``flavour`` and ``source()``,
        such as ``spade.envs.library.registry.LibraryEnv``) as unmeasured records ``library:<name>``; return how
        many were added."""
        count = 0
        for entry in entries:
            self.add(MemoryRecord(
                env_id=f"library:{entry.name}",
                code=entry.source(),
                skill=entry.skill,
                flavour=entry.flavour,
                win_rate=None,
                regret=None,
                step=LIBRARY_STEP,
            ))
            count += 1
        return count

    # ----- selection ---------------------------------------------------------------------------
    def _in_band(self, record: MemoryRecord) -> bool:
        return record.measured and self.config.band_low <= record.win_rate <= self.config.band_high

    def _is_negative(self, record: MemoryRecord) -> bool:
        return record.measured and (
            record.win_rate > self.config.negative_high or record.win_rate < self.config.negative_low
        )

    def positive_pool(self, skill: str, n: int | None = None) -> list[MemoryRecord]:
        """The candidates ``positive_seeds`` draws from, best first: measured same-skill records in the
        band ranked by regret (unknown regret last; ties: newest first), cut to max(pool_factor * n,
        pool_min); without any, the skill's unmeasured (library) records, newest first."""
        n = self.config.n_positive if n is None else n
        order = {id(r): i for i, r in enumerate(self._records)}
        same = [r for r in self._records if r.skill == skill]
        measured = [r for r in same if self._in_band(r)]
        if measured:
            measured.sort(key=lambda r: (r.regret is None, -(r.regret or 0.0), -order[id(r)]))
            return measured[: max(self.config.pool_factor * n, self.config.pool_min)]
        return [r for r in reversed(same) if not r.measured]

    def positive_seeds(self, skill: str, n: int | None = None, rng: random.Random | None = None) -> list[MemoryRecord]:
        """Up to ``n`` (default ``config.n_positive``) good examples for ``skill``, drawn without
        replacement from ``positive_pool`` with ``rng`` (no rng: the first n of the pool). Empty when
        the memory is disabled."""
        n = self.config.n_positive if n is None else n
        if not self.config.enabled or n <= 0:
            return []
        pool = self.positive_pool(skill, n)
        if len(pool) <= n:
            return pool
        return rng.sample(pool, n) if rng is not None else pool[:n]

    def negative_seed(self, skill: str, rng: random.Random | None = None) -> MemoryRecord | None:
        """One example to avoid: a record with win rate above ``negative_high`` or below
        ``negative_low``, of ``skill`` if any, else of any skill of the same family; drawn with ``rng``
        (no rng: the newest). None when there is none or the memory is disabled."""
        if not self.config.enabled:
            return None
        negatives = [r for r in self._records if self._is_negative(r)]
        pool = [r for r in negatives if r.skill == skill]
        if not pool:
            family = skill_kind(skill)
            pool = [r for r in negatives if skill_kind(r.skill) == family]
        if not pool:
            return None
        return rng.choice(pool) if rng is not None else pool[-1]

    # ----- persistence -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"format": MEMORY_FORMAT, "cap": self.config.cap, "records": [r.to_dict() for r in self._records]}

    def save(self, path: str | Path) -> Path:
        """Write the memory as JSON, atomically."""
        return atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path, config: MemoryConfig | None = None) -> "EnvironmentMemory":
        """Read a memory written by ``save``. The ``config`` (default ``MemoryConfig()``) governs; if it
        has a smaller cap than the file held, the oldest records are evicted."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"memory file {str(path)!r} does not exist") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"memory file {str(path)!r} is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != MEMORY_FORMAT or not isinstance(data.get("records"), list):
            raise ValueError(f"memory file {str(path)!r} is not a memory of format {MEMORY_FORMAT}")
        memory = cls(config)
        names = {f.name for f in fields(MemoryRecord)}
        for index, item in enumerate(data["records"]):
            if not isinstance(item, dict) or set(item) != names:
                raise ValueError(f"memory file {str(path)!r}: record {index} must have exactly the fields {sorted(names)}")
            memory.add(MemoryRecord(**item))
        return memory

"""Mechanism families after VHD-Play: sample parameters, solve exactly, then render an environment.

A family is a decision model with parameters ``theta`` (a JSON-able dict). Its reference solver gives
the optimal utility ``u*`` and an optimal decision list; its default policy (greedy on the values
visible in the agentic presentation, no probing) gives ``u0``; committing nothing gives ``u_idle``.
A sample is admitted by the sampler only when ``u* - u0 > min_gap * max(1, |u*|)`` and
``u_idle <= u0``; otherwise the family is re-sampled from the next sub-seed (``attempt`` is kept in the
record) up to ``max_attempts`` times, after which ``sample_instance`` raises ``ValueError``.

Utilities are always maximised (cost families use ``u = -cost``). Every family writes two plain
functions, ``utility(params, decisions)`` and ``advance(params, decisions, words)``, that use no imports
and no globals besides their own helpers: they run on the host (solvers are checked against them) and
their source is copied verbatim into the rendered environment, so the environment and the reference
score a decision list with the same code.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field

from spade.configtools import option

# agentic: hidden values + 'inspect'; written: every parameter shown, still stateful (VHD-Play's "informed");
# written_out: every parameter shown, the whole decision list submitted in one turn (spade.envs.mechanisms.render).
PRESENTATIONS = ("agentic", "written", "written_out")


@dataclass(frozen=True)
class SamplerConfig:
    """Fields shared by every family's config (each family's config subclasses this)."""

    max_attempts: int = option(64, "Re-samples (next sub-seed) allowed before giving up when u* - u0 is too small.", min=1)
    min_gap: float = option(0.02, "Required u* - u0, relative to max(1, |u*|); smaller gaps are re-sampled.", min=0.0)


@dataclass(frozen=True)
class MechanismInstance:
    """One solved parameter draw of one family, with its provenance."""

    family: str
    seed: int  # the caller's seed
    attempt: int  # sub-seed index that was accepted (0 = first draw)
    config: dict  # the family config used, as a dict
    params: dict  # theta
    params_hash: str  # sha256 of the canonical JSON of params (first 16 hex digits)
    u_star: float
    u0: float
    u_idle: float
    optimal: list  # optimal decision list (family-specific elements)
    default: list  # default-policy decision list
    optimal_actions: list = field(default_factory=list)  # action lines committing ``optimal``
    default_actions: list = field(default_factory=list)  # action lines committing ``default``
    extras: dict = field(default_factory=dict)  # family-specific reference numbers (e.g. expected stopping value)

    def to_dict(self) -> dict:
        return asdict(self)

    def score(self, utility: float) -> float:
        """Normalised score ``clip((u - u0) / (u* - u0), 0, 1)``."""
        return min(1.0, max(0.0, (utility - self.u0) / (self.u_star - self.u0)))


class MechanismFamily:
    """Base class; subclasses set ``name``, ``config_cls``, ``title``, ``solver``, ``env_functions``."""

    name: str = ""
    title: str = ""
    solver: str = ""  # how u* is computed, in words
    commands_help: str = ""  # one line listing the decision commands, shown after a bad command
    config_cls: type = SamplerConfig
    env_functions: tuple = ()  # plain functions copied into the environment; must include utility and advance

    # -- to be provided by each family -------------------------------------------------------------
    def sample(self, config, rng: random.Random) -> dict:
        raise NotImplementedError

    def solve(self, params: dict) -> tuple[float, list]:
        """Exact reference solver: ``(u*, optimal decisions)``."""
        raise NotImplementedError

    def default_policy(self, params: dict) -> list:
        """Greedy on the values visible in the agentic presentation; no probing."""
        raise NotImplementedError

    def brute_force(self, params: dict) -> float:
        """Independent exhaustive optimum, for tests on small instances."""
        raise NotImplementedError

    def actions(self, params: dict, decisions: list) -> list:
        """Action lines (without ``\\boxed``) that commit ``decisions``, one decision element per line."""
        raise NotImplementedError

    def intro(self, params: dict, presentation: str, probe_budget) -> str:
        raise NotImplementedError

    def reveals(self, params: dict) -> dict:
        """``inspect`` target (upper case) -> text revealing a hidden parameter."""
        return {}

    def probe_budget(self, params: dict):
        """Number of ``inspect`` targets allowed in the agentic presentation; None = unlimited."""
        return

    def extras(self, params: dict) -> dict:
        return {}

    # -- shared ------------------------------------------------------------------------------------
    def utility(self, params: dict, decisions: list) -> float:
        return float(self._function("utility")(params, decisions))

    def _function(self, name: str):
        for func in self.env_functions:
            if func.__name__ == name:
                return func
        raise ValueError(f"family {self.name!r} has no environment function {name!r}")


_REGISTRY: dict[str, MechanismFamily] = {}


def register_mechanism(family: MechanismFamily) -> MechanismFamily:
    """Register one family instance under its unique name."""
    if not family.name:
        raise ValueError(f"mechanism family {family!r} has no name")
    if family.name in _REGISTRY:
        raise ValueError(f"mechanism family {family.name!r} is already registered")
    names = {f.__name__ for f in family.env_functions}
    missing = {"utility", "advance"} - names
    if missing:
        raise ValueError(f"mechanism family {family.name!r} lacks environment functions {sorted(missing)}")
    _REGISTRY[family.name] = family
    return family


def families() -> dict[str, MechanismFamily]:
    return dict(_REGISTRY)


def get_family(name: str) -> MechanismFamily:
    if name not in _REGISTRY:
        raise ValueError(f"unknown mechanism family {name!r}; allowed: {sorted(_REGISTRY)}")
    return _REGISTRY[name]


def params_hash(params: dict) -> str:
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def sample_instance(name: str, seed: int, config=None) -> MechanismInstance:
    """Draw theta for family ``name`` with ``seed``, solve it and compute u0 and u_idle.

    Draws whose gap ``u* - u0`` is at most ``min_gap * max(1, |u*|)`` or whose idle utility exceeds
    ``u0`` are rejected and re-drawn from sub-seed ``attempt + 1``.
    """
    family = get_family(name)
    config = config if config is not None else family.config_cls()
    if not isinstance(config, family.config_cls):
        raise ValueError(f"family {name!r} needs a {family.config_cls.__name__}, got {type(config).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    for attempt in range(config.max_attempts):
        rng = random.Random(f"mechanism:{name}:{seed}:{attempt}")
        params = family.sample(config, rng)
        u_star, optimal = family.solve(params)
        default = family.default_policy(params)
        u0 = family.utility(params, default)
        u_idle = family.utility(params, [])
        if u_star - u0 <= config.min_gap * max(1.0, abs(u_star)) or u_idle > u0:
            continue
        return MechanismInstance(
            family=name, seed=seed, attempt=attempt, config=asdict(config), params=params,
            params_hash=params_hash(params), u_star=float(u_star), u0=float(u0), u_idle=float(u_idle),
            optimal=optimal, default=default, optimal_actions=family.actions(params, optimal),
            default_actions=family.actions(params, default), extras=family.extras(params),
        )
    raise ValueError(
        f"family {name!r} with seed {seed}: no draw in {config.max_attempts} attempts had u* - u0 > "
        f"{config.min_gap} * max(1, |u*|) and u_idle <= u0; raise max_attempts or lower min_gap"
    )

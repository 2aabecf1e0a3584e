"""The sources of a fixed procedural pool (``baseline.mode: fixed_pool``, and 'rlve' through
:class:`spade.core.rlve.RLVESource`) and how their environments are seeded into a run's slots.

Every source follows :class:`spade.core.env_source.EnvironmentSource`: ``entries()`` lists complete environment
files (:class:`spade.core.env_source.PoolEntry`). ``baseline.pool_source`` picks :class:`LibrarySource` (our
built-in library), :class:`CheckSource` (the toy's learning-check tasks) or :class:`MechanismSource` (solved
mechanism families, each instance admitted by checks C1-C3); :func:`make_source` builds the run's source,
:func:`assign_entries` samples its entries into the slots with the seed :func:`pool_seed`.
"""

from __future__ import annotations

import random

from spade.configtools import ConfigError
from spade.core.env_source import POOL_MODES, EnvironmentSource, PoolEntry, baseline_of, check_mechanism_pool
from spade.core.rlve import RLVESource
from spade.seeding import derive_seed

# Curriculum skill (spade.envs.library.registry.GAME_SKILLS) that labels a mechanism family's slots; a family missing
# here is labelled 'mechanism:<family>'.
MECHANISM_SKILLS = {
    "knapsack": "optimization",
    "inventory": "optimization",
    "scheduling": "optimization",
    "tardiness": "logical_deduction",
    "facility": "spatial_reasoning",
    "lp": "mathematical_reasoning",
    "stopping": "mathematical_reasoning",
}
MECHANISM_DRAWS_PER_INSTANCE = 4  # pool seeds tried per wanted instance before a family counts as failed


class LibrarySource:
    """Environments of our built-in library (src/spade/envs/library/)."""

    label = "library"

    def __init__(self, config):
        from spade.envs.library.registry import get_env, library

        heldout = set(config.eval.heldout_library.environments)
        tool_use = config.selfplay.flavour == "tool_use"
        names = list(baseline_of(config).pool_envs)
        if not names:
            raise ConfigError("config key 'baseline.pool_envs' is empty; give library environment names or ['all']")
        if names == ["all"]:
            chosen = [e for e in library() if e.name not in heldout and (e.flavour == "tool_use") == tool_use
                      and e.skill in config.selfplay.skills]
            if not chosen:
                raise ConfigError("config key 'baseline.pool_envs' is ['all'], but the built-in library has no "
                                  f"environment of flavour {config.selfplay.flavour!r} with a skill in "
                                  f"selfplay.skills {list(config.selfplay.skills)} outside eval.heldout_library")
        else:
            known = [e.name for e in library()]
            chosen = []
            for name in names:
                if name not in known:
                    raise ConfigError(f"config key 'baseline.pool_envs' names {name!r}, which is not a built-in "
                                      f"library environment; allowed: 'all' or any of {known}")
                if name in heldout:
                    raise ConfigError(f"config key 'baseline.pool_envs' names {name!r}, which is a held-out "
                                      "evaluation environment (eval.heldout_library.environments); training on it "
                                      "would contaminate the evaluation")
                chosen.append(get_env(name))
        self.envs = chosen

    def entries(self) -> list[PoolEntry]:
        return [PoolEntry(e.name, e.skill, e.source(), f"library:{e.name}") for e in self.envs]


class CheckSource:
    """The learning-check environments (``spade.envs.checks``), opened with their training instances (issues 16, 30)."""

    label = "checks"

    def __init__(self, config):
        from spade.envs.checks import CHECKS, check_names

        names = list(baseline_of(config).pool_envs)
        self.names = check_names() if names == ["all"] else names
        if not self.names:
            raise ConfigError("config key 'baseline.pool_envs' is empty; give learning-check names or ['all']")
        self.skills = CHECKS

    def entries(self) -> list[PoolEntry]:
        from spade.envs.checks import check_source

        return [PoolEntry(name, self.skills.get(name, "check"), check_source(name, "baseline.pool_envs"),
                          f"check:{name}") for name in self.names]


class MechanismSource:
    """Solved mechanism families (``spade.envs.mechanisms``, after VHD-Play) rendered as a fixed pool.

    For each family of ``baseline.mechanism_families`` the source draws pool seeds
    ``derive_seed(seed + pool_seed_offset, 'mechanism-pool', family, i)`` for i = 0, 1, ... and keeps an
    instance unless (a) its seed is one that ``eval.heldout_mechanisms`` evaluates, or its parameters hash
    equals that of an evaluated instance of the family (``heldout_collisions``), or (b) admission C1-C3
    rejects it (``rejected``, by reason; only with ``baseline.mechanism_admission``). Drawing stops at
    ``baseline.mechanism_instances`` kept instances, or fails with ``RuntimeError`` after
    ``MECHANISM_DRAWS_PER_INSTANCE`` x that many draws. Each entry is the instance rendered in
    ``baseline.mechanism_presentation``; its provenance holds the family, pool seed, draw index, sampler
    attempt, parameters hash, u*, u0, u_idle, the admission report and the family's draw counts.

    Admission needs a sandbox: ``pool`` (the run's ``SandboxPool``), else one is started from
    ``config.sandbox`` for the duration of ``entries()``.
    """

    label = "mechanisms"

    def __init__(self, config, pool=None):
        base = baseline_of(config)
        self.config, self.pool = config, pool
        self.families = check_mechanism_pool(config)
        self.instances, self.presentation = base.mechanism_instances, base.mechanism_presentation
        self.admission = base.mechanism_admission
        self.root_seed = config.seed + base.pool_seed_offset
        self.stats: dict = {}  # family -> {"drawn", "kept", "heldout_collisions", "rejected": {reason: n}}
        self._entries: list | None = None

    def pool_seed(self, family: str, index: int) -> int:
        return derive_seed(self.root_seed, "mechanism-pool", family, index)

    def heldout(self) -> tuple[set, dict]:
        """(every evaluated sampler seed, family -> parameters hashes of its evaluated instances)."""
        from spade.envs.mechanisms import sample_instance
        from spade.evals.heldout_mechanisms import heldout_seeds

        section = getattr(getattr(self.config, "eval", None), "heldout_mechanisms", None)
        if section is None:
            return set(), {}
        seeds = heldout_seeds(section)
        hashes = {family: {sample_instance(family, s).params_hash for s in family_seeds}
                  for family, family_seeds in seeds.items() if family in self.families}
        return {s for family_seeds in seeds.values() for s in family_seeds}, hashes

    def entries(self) -> list[PoolEntry]:
        if self._entries is None:
            if self.admission and self.pool is None:
                from spade.sandbox.pool import SandboxPool

                with SandboxPool(self.config.sandbox) as pool:
                    self._entries = self._build(pool)
            else:
                self._entries = self._build(self.pool)
        return list(self._entries)

    def _build(self, pool) -> list[PoolEntry]:
        from spade.envs.mechanisms import AdmissionConfig, admit, drivers_for, render, sample_instance

        heldout_seed_set, heldout_hashes = self.heldout()
        validation = getattr(self.config, "validation", None)
        entries = []
        for family in self.families:
            stats = {"drawn": 0, "kept": 0, "heldout_collisions": 0, "rejected": {}}
            self.stats[family] = stats
            kept = []
            for index in range(MECHANISM_DRAWS_PER_INSTANCE * self.instances):
                if len(kept) == self.instances:
                    break
                seed = self.pool_seed(family, index)
                stats["drawn"] += 1
                if seed in heldout_seed_set:
                    stats["heldout_collisions"] += 1
                    continue
                instance = sample_instance(family, seed)
                if instance.params_hash in heldout_hashes.get(family, set()):
                    stats["heldout_collisions"] += 1
                    continue
                code = render(instance, self.presentation)
                report = None
                if self.admission:
                    report = admit(code, drivers_for(instance, self.presentation), pool, AdmissionConfig(),
                                   reference_u_star=instance.u_star, validation=validation)
                    if not report.admitted:
                        for reason in report.reasons:
                            stats["rejected"][reason] = stats["rejected"].get(reason, 0) + 1
                        continue
                kept.append((index, instance, code, report))
            if len(kept) < self.instances:
                raise RuntimeError(f"baseline.pool_source 'mechanisms': family {family!r} kept {len(kept)} of "
                                   f"{self.instances} instances (baseline.mechanism_instances) after {stats['drawn']} "
                                   f"pool seeds; held-out collisions {stats['heldout_collisions']}, admission "
                                   f"rejections {stats['rejected']}")
            stats["kept"] = len(kept)
            for index, instance, code, report in kept:
                provenance = {"family": family, "seed": instance.seed, "draw": index, "attempt": instance.attempt,
                              "params_hash": instance.params_hash, "u_star": instance.u_star, "u0": instance.u0,
                              "u_idle": instance.u_idle, "presentation": self.presentation,
                              "admission": None if report is None else report.to_dict(), "family_draws": dict(stats)}
                skill = MECHANISM_SKILLS.get(family, f"mechanism:{family}")
                origin = f"mechanism:{family}:{instance.seed}:{instance.params_hash}"
                entries.append(PoolEntry(f"{family}-{instance.seed}", skill, code, origin, provenance))
        return entries


def make_source(config, pool=None) -> EnvironmentSource:
    """The fixed-pool source of ``config`` (modes 'fixed_pool' and 'rlve'). ``pool``: the run's sandbox pool,
    used by sources that replay their environments before handing them over (``MechanismSource``)."""
    base = baseline_of(config)
    mode = base.mode
    if mode == "fixed_pool":
        if base.pool_source == "mechanisms":
            return MechanismSource(config, pool)
        if base.pool_source == "checks":
            return CheckSource(config)
        return LibrarySource(config)
    if mode == "rlve":
        return RLVESource(config)
    raise ConfigError(f"config key 'baseline.mode' is {mode!r}, which has no fixed-pool source; allowed: {POOL_MODES}")


def assign_entries(entries: list, n_slots: int, seed: int) -> list:
    """Sample ``entries`` into ``n_slots`` slots, seeded: without repeats while the pool lasts, then each
    entry once more per round (every round reshuffled), so repeats are as even as possible."""
    if not entries:
        raise ValueError("a fixed pool needs at least one environment")
    rng = random.Random(seed)
    chosen: list = []
    while len(chosen) < n_slots:
        order = list(entries)
        rng.shuffle(order)
        chosen += order[: n_slots - len(chosen)]
    return chosen


def pool_seed(config, step: int = 0) -> int:
    """Seed of the pool draw at ``step``: the step-0 draw, or a later window's (``baseline.rlve_redraw``)."""
    root = config.seed + baseline_of(config).pool_seed_offset
    return derive_seed(root, "fixed-pool") if step == 0 else derive_seed(root, "fixed-pool", step)

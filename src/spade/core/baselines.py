"""Where the environments of a run come from: SPADE's designer, or a fixed pool (issue 7, deliverable 1).

The ``baseline:`` section of a run config picks the environment source of the self-play core:

``spade`` (default)
    The designer writes a new set every ``selfplay.regen_interval`` steps (Algorithm 1).
``fixed_env_grpo``
    The paper's Fixed-env GRPO row: environments "generated offline by that same Qwen3 backbone and held fixed
    throughout training". Before any update (step 0, base policy) the backbone designs a pool of
    ``baseline.pool_size`` valid environments through SPADE's own design path (``SelfPlay.design``: round-robin
    skills, corpus documents, memory seeds as ``memory.enabled`` says, intake and sandboxed validation, up to
    ``selfplay.design_attempts`` tries per slot, backfill when enabled), in rounds of one slot set each, round r
    designed as SPADE's regeneration r would be, until the pool is full or ``pool_max_rounds`` rounds are spent.
    Each step trains on ``slots`` environments drawn from the pool (:func:`pool_draws`; ``baseline.pool_redraw``).
    The designer is never called again, gets no reward and no training samples. ``baseline.hint_arm`` decides
    whether hints are written and the hint arm is played at step 0 (measurement of regret only; off by default,
    as the paper's baseline has no designer reward).
``fixed_pool``
    A procedural pool that runs here, a labelled stand-in for Fixed-env RLVE: environments of our
    built-in library (``baseline.pool_envs``: names, or ``["all"]`` for every library environment of
    the run's flavour and skills, held-out evaluation environments excluded), sampled with a seed into
    the slots at step 0 and never replaced. With ``baseline.pool_source: mechanisms`` the pool is instead
    made of solved mechanism families (after VHD-Play, :class:`MechanismSource`): each family of
    ``baseline.mechanism_families`` rendered from ``baseline.mechanism_instances`` sampler seeds, each
    instance admitted by checks C1-C3 in the sandbox before it enters the pool.
``rlve``
    RLVE's environment set (github.com/Zhiyuan-Zeng/RLVE) from a local checkout at
    ``baseline.rlve_path``, through :class:`RLVESource`, with RLVE's adaptive difficulty curriculum
    (``baseline.rlve_curriculum``, :func:`rlve_curriculum_step`) or one fixed difficulty.
``fixed_external_designer``
    The paper's "fixed ED" ablation: a model behind an OpenAI-compatible chat-completions endpoint
    (``baseline.external_base_url``, ``baseline.external_model``, its key read from the environment variable
    named by ``baseline.external_api_key_env``) writes the environments (:mod:`spade.designer.external`).
    ``baseline.external_pool: offline`` (default; paper: "a static pool generated offline by GPT-5.5, with corpus
    grounding", "an offline, memory-free pool"): before training it designs a pool exactly as Fixed-env GRPO's
    backbone does, with corpus grounding and without memory seeds, and each step's set is drawn from it the same
    way; no hints unless ``baseline.hint_arm``. ``online`` (before issue 14): it writes every environment set and
    its hints, with corpus grounding and memory as in SPADE and the same regeneration every
    ``selfplay.regen_interval`` steps; its reward is then computed for logging only. Either way only the agent is
    trained: the external designer yields no designer samples. With ``baseline.external_serve: base_model`` the
    local trainer serves a frozen copy of the run's own base model on a loopback port instead
    (:mod:`spade.designer.serve`) and points the client at it: the toy-scale stand-in for the paper's
    GPT-5.5, through the same HTTP client path; no endpoint keys or API key are needed then.

In 'fixed_pool' and 'rlve' the set is kept for the whole run, but its bookkeeping window still closes every
``selfplay.regen_interval`` steps: the window's win rates are archived as ``envs/set_<window start>.json``
(same environment ids and code in every file, except that RLVE's curriculum re-renders an environment whose
difficulty it raises), so the learnability analyses read a fixed run like a SPADE run. Only step 0 is a
regeneration step in the metrics, except in 'rlve' with ``baseline.rlve_redraw``, which draws a new set from
RLVE's environments at every window start. A designed pool (:func:`designs_pool`) is generated at step 0 (the
regeneration step of the metrics, with the whole generation's design counts) and kept in the run state (and in
``env_pool.json`` of the run folder); with ``pool_redraw: step`` every step's draw is its own set, archived as
``envs/set_<step>.json`` when the next step draws, with ``window`` one draw per window as above.

Environment sources follow :class:`EnvironmentSource`: ``entries()`` returns :class:`PoolEntry` rows,
each a complete environment file for our runtime (one class with ``reset``/``step``), which the core
validates in the sandbox like a designed candidate before it fills a slot.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from spade.configtools import ConfigError, option
from spade.seeding import derive_seed

MODES = ("spade", "fixed_env_grpo", "fixed_pool", "rlve", "fixed_external_designer")
FIXED_MODES = ("fixed_env_grpo", "fixed_pool", "rlve")
POOL_MODES = ("fixed_pool", "rlve")  # modes whose environments do not come from the designer
EXTERNAL_MODE = "fixed_external_designer"  # SPADE's loop with an external, untrained designer
POOL_SOURCES = ("library", "mechanisms", "checks")  # what 'fixed_pool' draws from
POOL_REDRAWS = ("step", "window")  # how often a designed pool's set is drawn (baseline.pool_redraw)
EXTERNAL_POOLS = ("offline", "online")  # where the fixed external designer's environments come from
RLVE_CURRICULA = ("adaptive", "fixed")  # how the difficulty of RLVE's environments moves
MECHANISM_PRESENTATIONS = ("agentic", "written", "written_out")  # = spade.envs.mechanisms.PRESENTATIONS
# Curriculum skill (spade.envs.library.GAME_SKILLS) that labels a mechanism family's slots; a family missing
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


@dataclass(frozen=True)
class BaselineConfig:
    mode: str = option("spade", "Environment source: 'spade' (designer, regenerated every k steps), "
                       "'fixed_env_grpo' (the backbone designs a pool of baseline.pool_size environments before training, "
                       "held fixed), 'fixed_pool' (built-in library pool, a stand-in for Fixed-env RLVE), 'rlve' "
                       "(RLVE's environments from baseline.rlve_path) or 'fixed_external_designer' (an untrained "
                       "model behind an OpenAI-compatible endpoint designs an offline pool, or every k steps: "
                       "baseline.external_pool).", choices=MODES)
    hint_arm: bool = option(False, "fixed_env_grpo and fixed_external_designer with external_pool 'offline': write "
                            "hints for step 0's set and play its hint arm to measure regret (analysis only; the "
                            "designer gets no reward either way). The paper's baselines play no hint arm.")
    pool_size: int = option(0, "fixed_env_grpo and fixed_external_designer (external_pool 'offline'): valid "
                            "environments in the pool generated before training. Paper: Fixed-env GRPO's pool is "
                            "'generated offline by that same Qwen3 backbone and held fixed', size not given (the "
                            "reference builds none); the fixed ED pool is GPT-5.5's, 7,872 games in the reference. "
                            "0 = as many as a SPADE run of the same config designs: ceil(selfplay.total_steps / "
                            "selfplay.regen_interval) x slots (games recipe: 400 / 4 x 24 = 2,400). Otherwise at "
                            "least the slot count (active_skills x envs_per_skill).", min=0)
    pool_round_factor: float = option(2.0, "Designed pools (pool_size): design rounds of one slot set each are "
                                      "allowed up to ceil(factor x pool_size / slots), i.e. the factor times the "
                                      "rounds a pool of all-valid designs needs (ours; the reference generates no "
                                      "such pool). A pool still short then is used as it is (metric pool_short); one "
                                      "with no valid environment stops the run.", min=1.0)
    pool_redraw: str = option("step", "Designed pools: how often the slots' set is drawn from the pool. 'step' "
                              "(reference code): a new set of slots entries every step, without replacement across "
                              "steps after a seeded shuffle, reshuffled once the pool is exhausted; every step's set "
                              "is then archived as its own set (envs/set_<step>.json). 'window': one draw per window "
                              "of selfplay.regen_interval steps, archived at the window's end (ours).",
                              choices=POOL_REDRAWS)
    pool_envs: list = option(["all"], "fixed_pool: built-in library environment names, or ['all'] for every "
                             "library environment of the run's flavour and skills (held-out ones excluded).")
    pool_seed_offset: int = option(0, "fixed_pool/rlve: added to the master seed for sampling the pool into slots.")
    pool_source: str = option("library", "fixed_pool: where the pool comes from: 'library' (built-in environments, "
                              "baseline.pool_envs), 'mechanisms' (solved mechanism families after VHD-Play, "
                              "baseline.mechanism_*) or 'checks' (the toy's learning-check tasks, spade.envs.checks; "
                              "baseline.pool_envs names them, ['all'] = every one).", choices=POOL_SOURCES)
    mechanism_families: list = option(["all"], "fixed_pool with pool_source 'mechanisms': mechanism family names "
                                      "(spade.envs.mechanisms), or ['all'] for every registered family.")
    mechanism_instances: int = option(2, "pool_source 'mechanisms': instances (sampler seeds) per family; seeds "
                                      "derive from seed + pool_seed_offset and never equal an "
                                      "eval.heldout_mechanisms instance.", min=1)
    mechanism_presentation: str = option("agentic", "pool_source 'mechanisms': presentation the pool is rendered in "
                                         "('agentic': hidden values + inspect; 'written': parameters shown, stateful; "
                                         "'written_out': parameters shown, one turn).", choices=MECHANISM_PRESENTATIONS)
    mechanism_admission: bool = option(True, "pool_source 'mechanisms': run admission checks C1-C3 (optimal, default "
                                       "and idle drivers, replayed twice, in the sandbox) on every instance; a "
                                       "rejected instance is skipped (counted in its entries' provenance) and the "
                                       "family's next pool seed is drawn.")
    rlve_path: str = option("", "rlve: path of a local checkout of github.com/Zhiyuan-Zeng/RLVE (holds Gym/).")
    rlve_environments: list = option(["all"], "rlve: RLVE environment identifiers (keys of "
                                     "Gym.environments.identifier2environment), or ['all'].")
    rlve_difficulty: int = option(0, "rlve: starting difficulty of every RLVE environment (the number of "
                                  "parameter-controller updates; RLVE's --initial-difficulty, 0 in its scripts); with "
                                  "rlve_curriculum 'fixed' every problem stays at this level.", min=0)
    rlve_curriculum: str = option("adaptive", "rlve: 'adaptive' = RLVE's own curriculum (paper): each environment's "
                                  "top difficulty rises by one once the agent's mean accuracy on problems of that "
                                  "level reaches rlve_raise_accuracy over rlve_check_episodes episodes; problems are "
                                  "drawn from the rlve_window levels up to the top. 'fixed' = every problem at "
                                  "rlve_difficulty (ours, for comparison).", choices=RLVE_CURRICULA)
    rlve_window: int = option(4, "rlve adaptive: difficulty levels problems are drawn from, uniformly, up to the "
                              "top (RLVE's --difficulty-sliding-window-size, default 4).", min=1)
    rlve_raise_accuracy: float = option(0.9, "rlve adaptive: mean accuracy at the top level that raises it (RLVE's "
                                        "--min-metric-to-increase-difficulty, default 0.9); at most 1.", min=0.0)
    rlve_check_episodes: int = option(128, "rlve adaptive: episodes at the top level before each check; the count "
                                      "restarts after every check (RLVE: --min-prompts-before-difficulty-check 8 x "
                                      "--n-samples-per-prompt 16 = 128 samples). Scale it with selfplay.group_size.",
                                      min=1)
    rlve_redraw: bool = option(True, "rlve: draw the slots' environments anew from the whole set at every window "
                               "start (every selfplay.regen_interval steps, seeded), so training covers RLVE's set as "
                               "RLVE's sampler does (paper; RLVE draws an environment per prompt, we per window and "
                               "slot). false = one draw at step 0, kept for the whole run.")
    rlve_python: str = option("", "rlve: Python interpreter that can import the checkout's Gym package (used to "
                              "list its environments); empty = this interpreter.")
    rlve_import_paths: list = option([], "rlve: further folders the rendered environments put on sys.path inside the "
                                     "sandbox (e.g. a site-packages holding RLVE's requirements); like the checkout "
                                     "they must be listed in sandbox.read_only_paths to be visible under bwrap.")
    external_base_url: str = option("", "fixed_external_designer: base URL of the OpenAI-compatible API, up to "
                                    "(not including) /chat/completions, e.g. https://api.openai.com/v1.")
    external_model: str = option("", "fixed_external_designer: model name sent as 'model' (the paper: GPT-5.5).")
    external_api_key_env: str = option("OPENAI_API_KEY", "fixed_external_designer: NAME of the environment "
                                       "variable holding the API key (the key never goes into a config).")
    external_timeout_s: float = option(600.0, "fixed_external_designer: timeout of one HTTP request in seconds.",
                                       min=1e-3)
    external_retries: int = option(4, "fixed_external_designer: retries of a request after a transient failure "
                                   "(connection error, timeout, HTTP 408/409/425/429/5xx).", min=0)
    external_backoff_s: float = option(2.0, "fixed_external_designer: first retry delay in seconds, doubled per "
                                       "retry (a larger numeric Retry-After wins; capped at 60 s).", min=0.0)
    external_concurrency: int = option(8, "fixed_external_designer: requests in flight at once.", min=1)
    external_max_tokens_field: str = option("max_tokens", "fixed_external_designer: request field of the token "
                                            "limit ('max_completion_tokens' for endpoints that reject max_tokens).",
                                            choices=("max_tokens", "max_completion_tokens"))
    external_serve: str = option("", "fixed_external_designer: '' = use the endpoint above; 'base_model' = the "
                                 "local trainer starts an OpenAI-compatible server of the run's base model, frozen "
                                 "(spade serve-designer, loopback, a free port, no key), points the client at it "
                                 "and stops it at the end: the toy stand-in for the paper's GPT-5.5.",
                                 choices=("", "base_model"))
    external_pool: str = option("offline", "fixed_external_designer: 'offline' (paper: 'a static pool generated "
                                "offline by GPT-5.5, with corpus grounding', 'an offline, memory-free pool'; the "
                                "reference trains on a downloaded 7,872-game GPT-5.5 pool) = the external model "
                                "designs baseline.pool_size environments before training, with corpus grounding and "
                                "no memory seeds, sampled like Fixed-env GRPO's pool (baseline.pool_redraw), no "
                                "hints unless baseline.hint_arm; 'online' (ours, before issue 14) = it designs a new "
                                "set and its hints every selfplay.regen_interval steps, with memory, as SPADE's "
                                "designer does.", choices=EXTERNAL_POOLS)
    external_serve_timeout_s: float = option(600.0, "fixed_external_designer with external_serve: seconds to wait "
                                             "for the local server to load the model and answer GET /v1/models.",
                                             min=1.0)


def _mode_text(base: BaselineConfig) -> str:
    """The mode for an error message, with the external designer's pool switch."""
    if base.mode == EXTERNAL_MODE:
        return f"{base.mode!r} with baseline.external_pool {base.external_pool!r}"
    return repr(base.mode)


def baseline_of(config) -> BaselineConfig:
    """The ``baseline`` section of ``config`` (the default when the config tree has none)."""
    return getattr(config, "baseline", None) or BaselineConfig()


def check_config(config) -> None:
    """Cross-section checks of a fixed mode; raise ``ConfigError`` naming the key and the fix."""
    base = baseline_of(config)
    if base.pool_source != "library":
        if base.mode != "fixed_pool":
            raise ConfigError(f"config key 'baseline.pool_source' is {base.pool_source!r}, but it applies to "
                              f"baseline.mode 'fixed_pool' only, not {base.mode!r}; set baseline.mode: fixed_pool or "
                              "baseline.pool_source: library")
        check_mechanism_pool(config)
    if base.external_pool != "offline" and base.mode != EXTERNAL_MODE:
        raise ConfigError(f"config key 'baseline.external_pool' is {base.external_pool!r}, but it applies to "
                          f"baseline.mode '{EXTERNAL_MODE}' only, not {base.mode!r}; remove it (default 'offline')")
    defaults = BaselineConfig()
    for key in ("pool_size", "pool_round_factor", "pool_redraw"):
        if getattr(base, key) != getattr(defaults, key) and not designs_pool(config):
            raise ConfigError(f"config key 'baseline.{key}' is {getattr(base, key)!r}, but it applies to a designed "
                              f"pool only (baseline.mode 'fixed_env_grpo', or '{EXTERNAL_MODE}' with "
                              f"baseline.external_pool 'offline'), not baseline.mode {_mode_text(base)}; remove it "
                              f"(default {getattr(defaults, key)!r})")
    if base.external_serve and base.mode != EXTERNAL_MODE:
        raise ConfigError(f"config key 'baseline.external_serve' is {base.external_serve!r}, but it applies to "
                          f"baseline.mode '{EXTERNAL_MODE}' only, not {base.mode!r}; set it to ''")
    if base.mode == "spade":
        return
    if config.selfplay.train_designer:
        raise ConfigError(f"config key 'baseline.mode' is {base.mode!r}, which never trains the designer, but "
                          "'selfplay.train_designer' is true; set selfplay.train_designer: false (the OpenRLHF "
                          "ticket plan reserves designer packs from it)")
    if base.hint_arm and not designs_pool(config):
        raise ConfigError(f"config key 'baseline.hint_arm' is true, but it applies to baseline.mode 'fixed_env_grpo' "
                          f"and to '{EXTERNAL_MODE}' with baseline.external_pool 'offline' only, not "
                          f"{_mode_text(base)} (the pool modes have no designer to write hints; the online external "
                          "designer always plays the hint arm, as SPADE does)")
    if designs_pool(config):
        slots = pool_slots(config)
        if 0 < base.pool_size < slots:
            raise ConfigError(f"config key 'baseline.pool_size' is {base.pool_size!r}, fewer than the {slots} slots "
                              "of one step's set (selfplay.active_skills x selfplay.envs_per_skill); set it to at "
                              f"least {slots}, or 0 for the size of a SPADE run's designs")
    if base.mode == "rlve":
        if base.rlve_raise_accuracy > 1.0:
            raise ConfigError(f"config key 'baseline.rlve_raise_accuracy' is {base.rlve_raise_accuracy!r}, but an "
                              "accuracy is at most 1 (RLVE's default: 0.9)")
        rlve_checkout(base.rlve_path)
        check_rlve_visible(config)
    if base.mode == EXTERNAL_MODE:
        check_external(base)


# ----- designed pools (fixed_env_grpo, the offline fixed external designer) --------------------------
def designs_pool(config) -> bool:
    """True when the run's environments are a pool designed before training: 'fixed_env_grpo' (the backbone) or
    'fixed_external_designer' with ``external_pool`` 'offline' (the external model)."""
    base = baseline_of(config)
    return base.mode == "fixed_env_grpo" or (base.mode == EXTERNAL_MODE and base.external_pool == "offline")


def pool_slots(config) -> int:
    """Environment slots of one step's set (paper: 3 active skills x 8 = 24)."""
    return config.selfplay.active_skills * config.selfplay.envs_per_skill


def pool_size_of(config) -> int:
    """Valid environments a designed pool is to hold: ``baseline.pool_size``, or with 0 as many as a SPADE run of
    the same config designs over its regenerations, ceil(total_steps / regen_interval) x slots (400 / 4 x 24 =
    2,400 with the games recipe)."""
    size = baseline_of(config).pool_size
    if size:
        return size
    sp = config.selfplay
    return math.ceil(sp.total_steps / sp.regen_interval) * pool_slots(config)


def pool_max_rounds(config) -> int:
    """Design rounds (one slot set each) a designed pool may take: ceil(pool_round_factor x pool size / slots)."""
    return math.ceil(baseline_of(config).pool_round_factor * pool_size_of(config) / pool_slots(config))


def pool_draws(n_entries: int, per_draw: int, count: int, seed: int) -> list:
    """The first ``count`` draws of a designed pool of ``n_entries`` environments, ``per_draw`` each (the reference's
    sampler, generalised): entry indices of pass p in the order ``random.Random(derive_seed(seed, 'pass', p))``
    shuffles ``range(n_entries)`` into; draws take the current pass's entries in that order, without replacement,
    and the next pass starts once the current one is used up. A draw that straddles two passes skips (and keeps
    for later, in order) the new pass's entries it already holds, so no draw repeats an entry. A draw holds
    min(per_draw, n_entries) entries. Returns [count] lists of indices."""
    if n_entries < 1 or per_draw < 1 or count < 0:
        raise ValueError(f"a designed pool needs n_entries >= 1, per_draw >= 1 and count >= 0, got {n_entries}, "
                         f"{per_draw}, {count}")
    want = min(per_draw, n_entries)
    draws: list = []
    stack: list = []  # the current pass's undrawn indices, next one last
    passes = 0
    for _ in range(count):
        chosen: list = []
        while len(chosen) < want:
            if not stack:
                order = list(range(n_entries))
                random.Random(derive_seed(seed, "pass", passes)).shuffle(order)
                stack = order[::-1]
                passes += 1
            taken = set(chosen)
            position = next(j for j in range(len(stack) - 1, -1, -1) if stack[j] not in taken)
            chosen.append(stack.pop(position))
        draws.append(chosen)
    return draws


def pool_order_seed(config) -> int:
    """Root seed of a designed pool's draw order (the reference shuffles with seed 42; ours derives from the master
    seed)."""
    return derive_seed(config.seed, "designed-pool-order")


def check_external(base: BaselineConfig) -> None:
    """The endpoint settings of 'fixed_external_designer' are set (the key itself is read when the backend
    is built: :meth:`spade.designer.external.ExternalDesignerBackend.from_config`). With ``external_serve``
    the run fills them in itself (:func:`spade.designer.serve.local_designer`)."""
    if base.external_serve:
        return
    for key, hint in (("external_base_url", "the OpenAI-compatible API's base URL, e.g. https://api.openai.com/v1"),
                      ("external_model", "the designer model's name at that endpoint"),
                      ("external_api_key_env", "the name of the environment variable holding the API key")):
        if not str(getattr(base, key)).strip():
            raise ConfigError(f"config key 'baseline.{key}' is empty, but baseline.mode 'fixed_external_designer' "
                              f"needs it: set it to {hint}")


# ----- sources ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolEntry:
    """One environment of a fixed pool: a complete environment file for our runtime."""

    name: str  # unique within the source
    skill: str  # curriculum skill label (RLVE environments: 'rlve')
    code: str  # the environment file
    origin: str  # 'library:<name>', 'rlve:<identifier>' or 'mechanism:<family>:<seed>:<params hash>'; the slot's source
    provenance: dict = field(default_factory=dict)  # where it came from (mechanism instances: MechanismSource)


@runtime_checkable
class EnvironmentSource(Protocol):
    """What a fixed-pool source provides: ``entries()`` lists every environment it offers, in a stable
    order; the core samples them into the slots (seeded) and validates each in the sandbox."""

    label: str

    def entries(self) -> list[PoolEntry]: ...


class LibrarySource:
    """Environments of our built-in library (src/spade/envs/library/)."""

    label = "library"

    def __init__(self, config):
        from spade.envs.library import get_env, library

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
    """The learning-check environments (``spade.envs.checks``): the toy's check that the trainer learns (issue 16)."""

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


def check_mechanism_pool(config) -> list:
    """The families of ``baseline.pool_source: mechanisms``; unknown names and a tool-use run raise ``ConfigError``."""
    from spade.evals.heldout_mechanisms import resolve_families

    if config.selfplay.flavour == "tool_use":
        raise ConfigError("config key 'baseline.pool_source' is 'mechanisms', whose environments are games, but "
                          "'selfplay.flavour' is 'tool_use'; use a game flavour or baseline.pool_source: library")
    return resolve_families(baseline_of(config).mechanism_families, "baseline.mechanism_families")


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


def check_rlve_visible(config) -> None:
    """Under bwrap the sandbox sees no host folder it is not given: the RLVE checkout and every
    ``baseline.rlve_import_paths`` entry must lie inside a ``sandbox.read_only_paths`` folder."""
    if config.sandbox.isolation not in ("auto", "bwrap"):
        return  # the weaker levels see the host filesystem
    base = baseline_of(config)
    shared = [Path(p).resolve() for p in config.sandbox.read_only_paths]
    for key, path in [("baseline.rlve_path", base.rlve_path)] + [("baseline.rlve_import_paths", p)
                                                                   for p in base.rlve_import_paths]:
        real = Path(path).expanduser().resolve()
        if not any(real == folder or folder in real.parents for folder in shared):
            raise ConfigError(f"config key '{key}' is {path!r}, which the bwrap sandbox cannot see: add {str(real)!r} "
                              f"(or a folder above it, world-readable, not under /tmp) to sandbox.read_only_paths "
                              f"(now {list(config.sandbox.read_only_paths)})")


def rlve_checkout(path: str) -> Path:
    """The RLVE checkout at ``path``, checked for the base module and the two registries the adapter reads."""
    if not path:
        raise ConfigError("config key 'baseline.rlve_path' is empty, but baseline.mode 'rlve' needs a local checkout "
                          "of github.com/Zhiyuan-Zeng/RLVE (git clone it and set baseline.rlve_path to the folder "
                          "that holds Gym/)")
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ConfigError(f"config key 'baseline.rlve_path' is {path!r}, which is not a folder; provide a local "
                          "checkout of github.com/Zhiyuan-Zeng/RLVE (the folder that holds Gym/)")
    for part in ("Gym/environment.py", "Gym/environments/__init__.py", "Gym/parameter_controllers/__init__.py"):
        if not (root / part).is_file():
            raise ConfigError(f"config key 'baseline.rlve_path' is {path!r}, but {root / part} is missing; the "
                              "folder must be a checkout of github.com/Zhiyuan-Zeng/RLVE (Gym.environment, "
                              "Gym.environments.identifier2environment and "
                              "Gym.parameter_controllers.identifier2controller)")
    return root.resolve()


_LIST_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from Gym.environments import identifier2environment
from Gym.parameter_controllers import identifier2controller
print(json.dumps(sorted(set(identifier2environment) & set(identifier2controller))))
"""

# The environment file rendered for one RLVE environment. RLVE's interface (Gym/environment.py):
# cls(**kwargs).generator(seed=int, parameter=dict) -> bool; .prompt_generator() -> str;
# .verifier(response) -> {"reward", "accuracy", "format_score", ...}; a ParameterController's
# get_parameter_list() gives the parameters of its current difficulty and update() raises it by one.
# Three shims let RLVE run in our sandbox (checked against RLVE's repository at commit 73cccd9, whose
# environments validate in the bwrap + seccomp sandbox with them and crash at load without):
# - the seccomp filter forbids threads, so numerical libraries are told to start no thread pool at import;
# - Gym/environment.py imports torch only to seed it in manual_seed (no environment uses torch): a stand-in
#   module saves loading torch in every episode process; Python's and NumPy's generators are still seeded;
# - RLVE bounds generation with a timeout that runs it in a worker thread (forbidden): generation runs in the
#   episode's own thread instead, bounded by the sandbox's per-call limit (sandbox.limits.call_timeout_s).
_RLVE_TEMPLATE = '''"""RLVE environment {identifier!r}, difficulty {low} to {top} (rendered by spade.core.baselines.RLVESource).

Single turn: the prompt is RLVE's own problem text; the reward is RLVE's verifier accuracy (0 or 1).
Each episode draws its difficulty uniformly from levels {low}..{top} (RLVE's sliding window), then one
parameter set of that level, from the episode seed.
"""

import os
import random
import sys
import types

RLVE_PATH = {path!r}
IMPORT_PATHS = {import_paths!r}
IDENTIFIER = {identifier!r}
TOP_DIFFICULTY = {top}
WINDOW = {window}
GENERATION_TRIES = 16

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[variable] = "1"  # no thread pools: the sandbox forbids threads
for folder in reversed([RLVE_PATH, *IMPORT_PATHS]):
    if folder not in sys.path:
        sys.path.insert(0, folder)
if "torch" not in sys.modules:  # RLVE imports torch only to seed it
    sys.modules["torch"] = types.ModuleType("torch")
    sys.modules["torch"].manual_seed = lambda seed: None
    sys.modules["torch"].cuda = types.SimpleNamespace(manual_seed_all=lambda seed: None)

import Gym.environment  # noqa: E402

Gym.environment.timeout = lambda seconds: (lambda function: function)  # no worker thread; the sandbox times calls

from Gym.environments import identifier2environment  # noqa: E402
from Gym.parameter_controllers import identifier2controller  # noqa: E402


def problem_difficulty(rng):
    """The episode's difficulty: uniform over the WINDOW levels up to TOP_DIFFICULTY, never below 0."""
    return rng.randrange(max(0, TOP_DIFFICULTY - WINDOW + 1), TOP_DIFFICULTY + 1)


class {class_name}:
    def __init__(self, max_turns=1, **kwargs):
        self.max_turns = max_turns
        self.problem = None
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        difficulty = problem_difficulty(rng)
        controller = identifier2controller[IDENTIFIER]()
        for _ in range(difficulty):
            controller.update()
        parameters = controller.get_parameter_list()
        for _ in range(GENERATION_TRIES):
            problem = identifier2environment[IDENTIFIER]()
            if problem.generator(seed=rng.randrange(2 ** 31), parameter=dict(rng.choice(parameters))):
                self.problem = problem
                break
        else:
            raise RuntimeError(f"RLVE environment {{IDENTIFIER}} generated no problem in {{GENERATION_TRIES}} tries")
        return self.problem.prompt_generator(), {{"environment": IDENTIFIER, "difficulty": difficulty}}

    def step(self, action):
        result = self.problem.verifier(str(action))
        accuracy = float(result.get("accuracy", 0.0))
        won = accuracy >= 1.0
        return ("Correct." if won else "Incorrect."), accuracy, True, False, {{"won": won}}
'''


def rlve_window(base: BaselineConfig) -> int:
    """Levels an RLVE problem is drawn from: ``rlve_window`` under the adaptive curriculum, 1 under 'fixed'."""
    return base.rlve_window if base.rlve_curriculum == "adaptive" else 1


def rlve_problem_difficulty(seed: int, top: int, window: int) -> int:
    """The difficulty of the problem a rendered RLVE environment draws for episode ``seed``: the same first draw
    of ``random.Random(seed)`` as the file's ``problem_difficulty`` (uniform over levels max(0, top-window+1)..top,
    RLVE's sliding window), so the trainer knows each episode's level without asking the sandbox."""
    return random.Random(seed).randrange(max(0, top - window + 1), top + 1)


def rlve_curriculum_step(level: dict, top_accuracies: list, check_episodes: int, raise_accuracy: float) -> dict:
    """One update of RLVE's adaptive difficulty for one environment (RLVE's RLVEManager.update).

    ``level``: ``{"top", "episodes", "correct"}``: the top difficulty, and the episodes played at the top since the
    last check with their accuracy sum. ``top_accuracies``: this step's accuracies of episodes at the top level
    (problems of lower levels never count). Once ``check_episodes`` are in, the top rises by one if their mean
    accuracy is at least ``raise_accuracy``; the count restarts after every check, raised or not. Returns the new
    level.
    """
    episodes = level["episodes"] + len(top_accuracies)
    correct = level["correct"] + sum(top_accuracies)
    if episodes < check_episodes:
        return {"top": level["top"], "episodes": episodes, "correct": correct}
    raised = correct / episodes >= raise_accuracy
    return {"top": level["top"] + int(raised), "episodes": 0, "correct": 0.0}


def render_rlve(base: BaselineConfig, identifier: str, top: int) -> str:
    """The environment file of RLVE environment ``identifier`` with top difficulty ``top``."""
    class_name = "Rlve" + "".join(part.capitalize() for part in re.split(r"[^0-9A-Za-z]+", identifier) if part)
    window = rlve_window(base)
    return _RLVE_TEMPLATE.format(identifier=identifier, top=top, window=window, low=max(0, top - window + 1),
                                 path=str(rlve_checkout(base.rlve_path)),
                                 import_paths=[str(Path(p).expanduser().resolve()) for p in base.rlve_import_paths],
                                 class_name=class_name)


def check_rlve(config, validator, every: int = 1, levels: tuple = (0,), progress: bool = False) -> dict:
    """Validate RLVE's environments as a run would see them (``spade env check-rlve``): every ``every``-th identifier
    of ``baseline.rlve_environments``, rendered at each top difficulty of ``levels`` with the run's window, through
    ``validator`` (the run's sandbox). Returns ``{"checked", "counts": {level: {reason: n}}, "failed": [...]}``."""
    if every < 1 or not levels or min(levels) < 0:
        raise ConfigError(f"check-rlve: --every must be >= 1 and --levels non-negative, got {every!r} and {levels!r}")
    base = baseline_of(config)
    identifiers = RLVESource(config).identifiers[::every]
    counts: dict = {}
    failed = []
    jobs = [(level, identifier) for level in levels for identifier in identifiers]
    if progress:
        from tqdm import tqdm

        jobs = tqdm(jobs, desc="RLVE environments", unit="env")
    for level, identifier in jobs:
        report = validator.validate(render_rlve(base, identifier, level))
        level_counts = counts.setdefault(str(level), {})
        level_counts[report.reason] = level_counts.get(report.reason, 0) + 1
        if not report.valid:
            failed.append({"identifier": identifier, "level": level, "reason": report.reason,
                           "message": report.message[:500]})
    return {"checkout": str(rlve_checkout(base.rlve_path)), "window": rlve_window(base), "checked": identifiers,
            "counts": counts, "failed": failed}


class RLVESource:
    """RLVE's environments as files for our runtime (adapter; RLVE's format read from its repository).

    RLVE registers each environment twice by identifier: ``Gym.environments.identifier2environment``
    (a ``VerifiableEnvironment`` class: ``generator(seed, parameter)``, ``prompt_generator()``,
    ``verifier(response)``) and ``Gym.parameter_controllers.identifier2controller`` (its difficulty
    schedule). For each chosen identifier this source renders a single-turn environment file that imports
    RLVE from the checkout, draws a problem from the episode seed (its level from the curriculum's window up
    to the top difficulty, which starts at ``baseline.rlve_difficulty``; see :func:`rlve_curriculum_step`), and
    rewards RLVE's verifier accuracy. The files run inside our sandbox, so the sandbox must see the checkout
    and RLVE's own dependencies (numpy, networkx, sympy; ``baseline.rlve_import_paths``); where it does not,
    validation rejects them (``load_failed``) and the core stops with that reason.
    """

    label = "rlve"

    def __init__(self, config):
        base = self.base = baseline_of(config)
        self.root = rlve_checkout(base.rlve_path)
        available = self.available(base.rlve_python or sys.executable)
        wanted = list(base.rlve_environments)
        if not wanted:
            raise ConfigError("config key 'baseline.rlve_environments' is empty; give RLVE identifiers or ['all']")
        if wanted == ["all"]:
            wanted = available
        for name in wanted:
            if name not in available:
                shown = available[:20] + (["..."] if len(available) > 20 else [])
                raise ConfigError(f"config key 'baseline.rlve_environments' names {name!r}, which the RLVE checkout "
                                  f"{self.root} does not register; allowed: 'all' or any of {shown}")
        if not wanted:
            raise ConfigError(f"the RLVE checkout {self.root} (config key 'baseline.rlve_path') registers no "
                              "environment with both a class and a parameter controller")
        self.identifiers = wanted

    def available(self, python: str) -> list:
        """Identifiers registered in both RLVE registries (listed in a child interpreter)."""
        try:
            done = subprocess.run([python, "-c", _LIST_SCRIPT, str(self.root)], capture_output=True, text=True,
                                  timeout=300, check=False)
        except OSError as exc:
            raise ConfigError(f"config key 'baseline.rlve_python' ({python!r}) cannot run: {exc}") from None
        if done.returncode != 0:
            raise ConfigError(f"importing RLVE's Gym from config key 'baseline.rlve_path' ({str(self.root)!r}) with "
                              f"{python} failed; install RLVE's requirements there or point baseline.rlve_python at "
                              f"an interpreter that has them:\n{done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def render(self, identifier: str) -> str:
        """The file of ``identifier`` at the starting difficulty (the curriculum re-renders it as its level rises)."""
        return render_rlve(self.base, identifier, self.base.rlve_difficulty)

    def entries(self) -> list[PoolEntry]:
        return [PoolEntry(name, "rlve", self.render(name), f"rlve:{name}") for name in self.identifiers]


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

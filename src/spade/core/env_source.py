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
    Each step trains on ``slots`` environments drawn from the pool (:func:`spade.core.designed_pool.pool_draws`;
    ``baseline.pool_redraw``).
    The designer is never called again, gets no reward and no training samples. ``baseline.hint_arm`` decides
    whether hints are written and the hint arm is played at step 0 (measurement of regret only; off by default,
    as the paper's baseline has no designer reward).
``fixed_pool``
    A procedural pool that runs here, a labelled stand-in for Fixed-env RLVE: environments of our
    built-in library (``baseline.pool_envs``: names, or ``["all"]`` for every library environment of
    the run's flavour and skills, held-out evaluation environments excluded), sampled with a seed into
    the slots at step 0 and never replaced. With ``baseline.pool_source: mechanisms`` the pool is instead
    made of solved mechanism families (after VHD-Play, :class:`spade.core.pool_sources.MechanismSource`): each family of
    ``baseline.mechanism_families`` rendered from ``baseline.mechanism_instances`` sampler seeds, each
    instance admitted by checks C1-C3 in the sandbox before it enters the pool.
``rlve``
    RLVE's environment set (github.com/Zhiyuan-Zeng/RLVE) from a local checkout at
    ``baseline.rlve_path``, through :class:`spade.core.rlve.RLVESource`, with RLVE's adaptive difficulty
    curriculum (``baseline.rlve_curriculum``, :func:`spade.core.rlve.rlve_curriculum_step`) or one fixed
    difficulty. By default as the reference code ran it: the 16 environments of ``RLVE_SETS['official16']``
    in ``baseline.rlve_slots`` (16) slots, drawn anew every step (``baseline.rlve_redraw``), each slot's group
    playing one shared problem (``baseline.rlve_shared_problem``).
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

In 'fixed_pool' (and 'rlve' with ``baseline.rlve_redraw: never``) the set is kept for the whole run, but its
bookkeeping window still closes every ``selfplay.regen_interval`` steps: the window's win rates are archived as
``envs/set_<window start>.json`` (same environment ids and code in every file, except that RLVE's curriculum
re-renders an environment whose difficulty it raises), so the learnability analyses read a fixed run like a SPADE
run. Only step 0 is a regeneration step in the metrics, except in 'rlve' with ``rlve_redraw`` 'step' (default),
which draws a new set from RLVE's environments at every step, each archived as ``envs/set_<step>.json``, or
'window', which draws at every window start. A designed pool (:func:`designs_pool`) is generated at step 0 (the
regeneration step of the metrics, with the whole generation's design counts) and kept in the run state (and in
``env_pool.json`` of the run folder); with ``pool_redraw: step`` every step's draw is its own set, archived as
``envs/set_<step>.json`` when the next step draws, with ``window`` one draw per window as above.

Environment sources follow :class:`EnvironmentSource`: ``entries()`` returns :class:`PoolEntry` rows,
each a complete environment file for our runtime (one class with ``reset``/``step``), which the core
validates in the sandbox like a designed candidate before it fills a slot.

This module holds the ``baseline:`` section (:class:`BaselineConfig`), its cross-section checks
(:func:`check_config`) and the source interface (:class:`PoolEntry`, :class:`EnvironmentSource`). The pools
themselves: :mod:`spade.core.designed_pool` (a pool designed before training: size, round budget, draws),
:mod:`spade.core.pool_sources` (the library, learning-check and mechanism sources, seeded into the slots) and
:mod:`spade.core.rlve` (RLVE's environments and curriculum). The self-play core plays them through
:mod:`spade.core.fixed_envs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from spade.configtools import ConfigError, option

MODES = ("spade", "fixed_env_grpo", "fixed_pool", "rlve", "fixed_external_designer")
FIXED_MODES = ("fixed_env_grpo", "fixed_pool", "rlve")
POOL_MODES = ("fixed_pool", "rlve")  # modes whose environments do not come from the designer
EXTERNAL_MODE = "fixed_external_designer"  # SPADE's loop with an external, untrained designer
POOL_SOURCES = ("library", "mechanisms", "checks")  # what 'fixed_pool' draws from
POOL_REDRAWS = ("step", "window")  # how often a designed pool's set is drawn (baseline.pool_redraw)
EXTERNAL_POOLS = ("offline", "online")  # where the fixed external designer's environments come from
RLVE_CURRICULA = ("adaptive", "fixed")  # how the difficulty of RLVE's environments moves
RLVE_REDRAWS = ("step", "window", "never")  # how often RLVE's slots are drawn anew (baseline.rlve_redraw)
MECHANISM_PRESENTATIONS = ("agentic", "written", "written_out")  # = spade.envs.mechanisms.PRESENTATIONS


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
    rlve_environments: list = option(["official16"], "rlve: RLVE environment identifiers (keys of "
                                     "Gym.environments.identifier2environment), ['all'] for every one, or the name of "
                                     "a set of spade.core.rlve.RLVE_SETS: ['official16'] (reference code: the 16 "
                                     "environments of cmd/games/train_fixed_rlve_*.sh, RLVE's own num-environment=16 "
                                     "set).")
    rlve_slots: int = option(16, "rlve: environment slots of a step's set, each played by a group of "
                             "train.global_batch / rlve_slots episodes (reference code: 16 environments x 16 plays = "
                             "global batch 256). 0 = selfplay.active_skills x selfplay.envs_per_skill (24, before "
                             "issue 32).", min=0)
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
    rlve_redraw: str = option("step", "rlve: how often the slots' environments are drawn anew from the set (seeded, "
                              "each rendered at its current level). 'step' (reference code: "
                              "--spade-game-regeneration-interval 1): every step, and every step's set is archived "
                              "as its own set; 'window' (before issue 32): every selfplay.regen_interval steps; "
                              "'never': the step-0 draw is kept for the run.", choices=RLVE_REDRAWS)
    rlve_shared_problem: bool = option(True, "rlve: all plays of a slot's group in a step get ONE problem (the same "
                                       "problem seed, hence the same difficulty), a new one every step, as RLVE's "
                                       "n samples per prompt (reference code: --spade-fixed-env-same-problem). false "
                                       "= every play draws its own problem from its episode seed (before issue 32). "
                                       "The plays still sample their replies with their own seeds.")
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
    """Environment slots of one step's set: 3 active skills x 8 = 24 (paper), or ``baseline.rlve_slots`` in 'rlve'
    (reference code: 16)."""
    base = baseline_of(config)
    if base.mode == "rlve" and base.rlve_slots:
        return base.rlve_slots
    return config.selfplay.active_skills * config.selfplay.envs_per_skill


# ----- settings a mode needs (checked by check_config) ------------------------------------------------
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


def check_mechanism_pool(config) -> list:
    """The families of ``baseline.pool_source: mechanisms``; unknown names and a tool-use run raise ``ConfigError``."""
    from spade.evals.heldout_mechanisms import resolve_families

    if config.selfplay.flavour == "tool_use":
        raise ConfigError("config key 'baseline.pool_source' is 'mechanisms', whose environments are games, but "
                          "'selfplay.flavour' is 'tool_use'; use a game flavour or baseline.pool_source: library")
    return resolve_families(baseline_of(config).mechanism_families, "baseline.mechanism_families")


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


# ----- the source interface ---------------------------------------------------------------------------
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


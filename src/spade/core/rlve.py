"""RLVE's environment set (github.com/Zhiyuan-Zeng/RLVE) as a fixed pool (``baseline.mode: rlve``).

:class:`RLVESource` lists the environments of a local checkout (``baseline.rlve_path``) and renders each as a
single-turn environment file for our runtime (:func:`render_rlve`); :func:`rlve_curriculum_step` is RLVE's
adaptive difficulty curriculum, :func:`rlve_problem_difficulty` the level an episode's problem is drawn at, and
:func:`check_rlve` validates the rendered files in the sandbox (``spade env check-rlve``). :data:`RLVE_SETS` names
the environment sets ``baseline.rlve_environments`` may give by name; :func:`rlve_problem_seed` is the problem a
slot's group shares in a step (``baseline.rlve_shared_problem``). The self-play core advances the curriculum after
play (:mod:`spade.core.fixed_envs`).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

from spade.configtools import ConfigError
from spade.core.env_source import BaselineConfig, PoolEntry, baseline_of, rlve_checkout
from spade.seeding import derive_seed

# Named RLVE environment sets, for ``baseline.rlve_environments: [<name>]``. 'official16' is the reference code's
# default set (spade-rl/spade cmd/games/train_fixed_rlve_{8b,30b}.sh:27-36, 4b.sh:28-37, RLVE_ENV_SET=official16), itself
# RLVE's own 16-environment training set (RLVE scripts/training/*/rlve/num-environment=16.sh). All 16 are registered
# in both of RLVE's registries at its commit 73cccd9 and in the reference's vendored copy
# (spade/external/rlve/Gym/environments/__init__.py); a checkout that lacks one stops the run, naming it.
RLVE_SETS = {
    "official16": ("Division", "EuclidGame", "GCDOne_Counting", "HamiltonianPath", "LampChanging",
                   "LargestConvexPolygon", "Multiplication", "PCPPermutation", "Path_NoGoingBack_Counting", "SAT",
                   "ShortestPath", "Sorting", "SpiralMatrix", "SubsequenceReversalLNDS", "UndamagedSubmatrixCounting",
                   "WYRLevelingGround"),
}


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
_RLVE_TEMPLATE = '''"""RLVE environment {identifier!r}, difficulty {low} to {top} (rendered by spade.core.rlve.RLVESource).

Single turn: the prompt is RLVE's own problem text; the reward is RLVE's verifier accuracy (0 or 1).
Each episode draws its difficulty uniformly from levels {low}..{top} (RLVE's sliding window), then one
parameter set of that level, from its problem seed: the constructor's problem_seed when given (one problem
shared by a group of plays), else the episode seed.
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
    def __init__(self, max_turns=1, problem_seed=None, **kwargs):
        self.max_turns = max_turns
        self.problem_seed = problem_seed  # a group's shared problem; None: each episode's own seed
        self.problem = None
        self.reset()

    def reset(self, seed=None):
        if self.problem_seed is not None:
            seed = self.problem_seed
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


def rlve_problem_seed(seed: int, step: int, slot_id: str) -> int:
    """The problem every play of slot ``slot_id``'s group gets at ``step`` (``baseline.rlve_shared_problem``; the
    reference draws one (parameter, seed) per selected environment and step and gives it to all 16 plays,
    rlve_adapter.py:284-351, fixed_env_orchestrator.py:522-536). Passed to the rendered file as ``problem_seed``;
    the plays keep their own episode seeds, so their replies are sampled independently."""
    return derive_seed(seed, "rlve-problem", step, slot_id)


def describe_rlve(config) -> str:
    """One line on how an 'rlve' run draws and plays its environments (``spade train --dry-run``)."""
    from spade.core.env_source import pool_slots

    base = baseline_of(config)
    names = base.rlve_environments
    named = f"{names[0]} ({len(RLVE_SETS[names[0]])})" if len(names) == 1 and names[0] in RLVE_SETS else \
        ("all" if names == ["all"] else f"{len(names)} named")
    redraw = {"step": "every step", "window": f"every {config.selfplay.regen_interval} steps",
              "never": "once"}[base.rlve_redraw]
    problems = "one shared problem per group" if base.rlve_shared_problem else "one problem per episode"
    return (f"RLVE {named} environments, {pool_slots(config)} slots drawn {redraw}, {problems}, curriculum "
            f"{base.rlve_curriculum}")


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
    RLVE from the checkout, draws a problem from the episode seed or the group's shared ``problem_seed`` (its level
    from the curriculum's window up to the top difficulty, which starts at ``baseline.rlve_difficulty``; see
    :func:`rlve_curriculum_step`), and
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
            raise ConfigError("config key 'baseline.rlve_environments' is empty; give RLVE identifiers, ['all'] or "
                              f"the name of a set ({sorted(RLVE_SETS)})")
        named = wanted[0] if len(wanted) == 1 and wanted[0] in RLVE_SETS else None
        if wanted == ["all"]:
            wanted = available
        elif named:
            wanted = list(RLVE_SETS[named])
            missing = [name for name in wanted if name not in available]
            if missing:
                raise ConfigError(f"config key 'baseline.rlve_environments' is [{named!r}], but the RLVE checkout "
                                  f"{self.root} does not register {missing} of that set; use a checkout of "
                                  "github.com/Zhiyuan-Zeng/RLVE that has them (commit 73cccd9 does), or list the "
                                  "identifiers to train on, or ['all']")
        for name in wanted:
            if name not in available:
                shown = available[:20] + (["..."] if len(available) > 20 else [])
                raise ConfigError(f"config key 'baseline.rlve_environments' names {name!r}, which the RLVE checkout "
                                  f"{self.root} does not register; allowed: 'all', a set name of {sorted(RLVE_SETS)} "
                                  f"or any of {shown}")
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

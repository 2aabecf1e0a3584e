"""Shared fixtures: one sandbox pool per test session (workers are persistent, as in training)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from spade.sandbox import SandboxConfig, SandboxLimits, SandboxPool

pytest_plugins = ["skip_policy"]  # SPADE_NO_SKIP=1 (CI): a skip that set-up could have helped fails

FAST_LIMITS = SandboxLimits(call_timeout_s=1.0, open_timeout_s=2.0, grace_s=1.0, memory_mb=512)


def pytest_sessionstart(session):
    """The suite tests the real sandbox: stop at once, with the reason, where bwrap cannot start."""
    from spade.sandbox import IsolationError
    from spade.sandbox.levels import resolve_level

    try:
        resolve_level(SandboxConfig(min_isolation="bwrap"))
    except IsolationError as exc:
        pytest.exit(f"the tests need the bwrap sandbox (user namespaces), which cannot start here: {exc}", 3)


# The suite runs in two processes (pyproject addopts: -n 2), each test file a unit of work that one process runs whole
# (its module fixtures are made once). These files run in one process, one after another, ahead of every other file:
# three share the local SLURM cluster (one per machine) and the toy run made through it (``tiny_default``), and the
# CPU integration run trains through OpenRLHF, Ray and vLLM as the rehearsal does (kept apart from it: two such
# trainings beside the other process would crowd 2 cores). Together they are the suite's longest path, so they start
# first while the other process takes the other files in turn.
ENGINE_FILES = ("test_integration_openrlhf.py", "test_local_slurm.py", "test_pipeline.py", "test_rehearsal_run.py")


def work_unit(nodeid: str) -> str:
    """The unit of work of a test for the two processes: its file, or 'engines' for the ENGINE_FILES."""
    path = nodeid.split("::", 1)[0]
    return "engines" if Path(path).name in ENGINE_FILES else path


def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scheduling by scope, with work_unit as the scope, in collection order (the units are not
    reordered by size). Not `--dist loadgroup`: pytest-xdist 3.8 marks a group in the test's node id, which pytest 9.2
    no longer reads from the attribute it sets, so every test became a unit of its own."""
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return FileUnits(config, log)


def pytest_collection_modifyitems(config, items):
    """The ENGINE_FILES' tests first (a stable sort: every file keeps its order), so their unit starts at once."""
    items.sort(key=lambda item: item.path.name not in ENGINE_FILES)


@pytest.fixture(scope="session")
def pool():
    with SandboxPool(SandboxConfig(workers=2, limits=FAST_LIMITS)) as shared:
        yield shared


@pytest.fixture(scope="session")
def slurm():
    """The local SLURM cluster (tests/slurm_cluster.py): started at first use, stopped at the end of the session."""
    from slurm_cluster import start_cluster

    cluster = start_cluster()
    yield cluster
    cluster.script("stop", "--purge")


@pytest.fixture(scope="session")
def tiny_default(tmp_path_factory, request):
    """The default target of test_pipeline's TINY config in a scratch folder, made once for tests/test_pipeline.py and
    tests/test_local_slurm.py: through the cluster profile on the local SLURM where it runs (CI: SPADE_SLURM=1), else
    with Snakemake's local executor (the README's command). (folder, the finished snakemake process, the cluster or
    None)."""
    from test_pipeline import ROOT, SNAKEMAKE, TINY

    base = tmp_path_factory.mktemp("pipeline")
    (base / "tiny.yaml").write_text(TINY)
    try:
        slurm = request.getfixturevalue("slurm")
    except pytest.skip.Exception:
        slurm = None
    started = time.monotonic()
    if slurm is not None:
        done = slurm.snakemake(base, "--configfile", str(ROOT / "configs/default.yaml"), str(base / "tiny.yaml"))
    else:
        done = subprocess.run([*SNAKEMAKE, str(base / "tiny.yaml"), "--directory", str(base)], capture_output=True,
                              text=True, timeout=900)  # test_pipeline's bound for this run
    where = "through the local SLURM" if slurm is not None else "with the local executor"
    print(f"the tiny toy's default target {where}: {time.monotonic() - started:.0f} s")
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    return base, done, slurm


def env_source(body: str, name: str = "Env") -> str:
    """A minimal valid game environment whose ``step`` body is ``body`` (indented 8 spaces)."""
    return f'''
import random

class {name}:
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns
        self.reset()

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(0, 9)
        self.turn = 0
        return "Guess a digit; answer as \\\\boxed{{d}}.", {{"turn": 0}}

    def step(self, action):
        self.turn += 1
{body}

    def solution(self):
        return str(self.target)
'''


GOOD_STEP = """        won = action.strip() == "\\\\boxed{" + str(self.target) + "}"
        return ("Correct." if won else "Wrong."), float(won), won, self.turn >= self.max_turns, {"turn": self.turn}"""


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Llama with an offline tokenizer, prepared once per session."""
    from spade.inference.models import TINY_RANDOM, prepare_model

    return prepare_model(TINY_RANDOM, tmp_path_factory.mktemp("models") / "tiny-random")


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    from spade.inference.models import load_model

    return load_model(tiny_model_dir)

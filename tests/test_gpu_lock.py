"""The GPU image's lock (containers/requirements-gpu.lock): torchaudio pairs with torch or is absent (issue 38), and the
premises of leaving it out hold: the image installs the lock with --no-deps, and nothing on the text-only path of the
real vLLM 0.29 or OpenRLHF imports torchaudio."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spade.rlhf import vllm_cpu

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "containers" / "requirements-gpu.lock"


def pins(text: str) -> dict:
    """``name -> version`` of a lock's ``name==version`` lines (comments skipped)."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[name.strip().lower()] = version.strip()
    return found


def minor(version: str) -> tuple:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:2])


def pairing_problem(locked: dict) -> str:
    """'' when torchaudio is absent or has torch's major.minor (torchaudio X.Y is built for torch X.Y), else why not."""
    if "torchaudio" not in locked:
        return ""
    if "torch" not in locked:
        return f"torchaudio=={locked['torchaudio']} is pinned without torch"
    if minor(locked["torchaudio"]) != minor(locked["torch"]):
        return (f"torchaudio=={locked['torchaudio']} does not pair with torch=={locked['torch']} (torchaudio X.Y is "
                f"torch X.Y's); pin torchaudio {'.'.join(map(str, minor(locked['torch'])))}.* or drop it")
    return ""


def test_torchaudio_pairs_with_torch_or_is_absent():
    locked = pins(LOCK.read_text())
    assert locked["torch"] == "2.13.0" and len(locked) > 200
    assert pairing_problem(locked) == ""


def test_the_pairing_rule_catches_the_old_pin():
    locked = pins(LOCK.read_text())
    old = pins(LOCK.read_text() + "\ntorchaudio==2.11.0\n")  # the lock before issue 38
    assert "does not pair with torch==2.13.0" in pairing_problem(old)
    assert pairing_problem({**locked, "torchaudio": "2.13.0"}) == ""
    assert pairing_problem({**locked, "torchaudio": "2.13.1+cu130"}) == ""
    assert "without torch" in pairing_problem({"torchaudio": "2.13.0"})


def test_the_image_installs_the_lock_without_resolving_dependencies():
    """Leaving torchaudio out of the lock keeps it out of the image only because pip installs the lock with --no-deps
    (otherwise vLLM's own requirement would bring torchaudio 2.11.0 back)."""
    dockerfile = (ROOT / "containers" / "Dockerfile").read_text()
    apptainer = (ROOT / "containers" / "Apptainer.def").read_text()
    assert "RUN pip install --no-deps -r /opt/spade/requirements-gpu.lock" in dockerfile
    assert "$PIP --no-deps -r /opt/spade/requirements-gpu.lock" in apptainer
    assert not [line for line in (ROOT / "envs" / "spade-gpu.yaml").read_text().splitlines()
                if "torchaudio" in line and not line.lstrip().startswith("#")]


TEXT_ONLY_PATH = """
import importlib.util, sys
assert importlib.util.find_spec("torchaudio") is None or "--trap" in sys.argv
import vllm
from vllm.model_executor.models.registry import ModelRegistry
for arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
    assert ModelRegistry._try_load_model_cls(arch) is not None, arch
import vllm.entrypoints.llm, vllm.multimodal, vllm.transformers_utils.processors
import vllm.v1.engine.async_llm, vllm.v1.engine.core, vllm.v1.worker.gpu_worker, vllm.v1.worker.gpu_model_runner
import openrlhf.trainer.ray.vllm_engine, openrlhf.trainer.ray.vllm_worker_wrap
print("torchaudio" in sys.modules)
"""


def _real_vllm():
    try:
        return vllm_cpu.require()
    except vllm_cpu.VllmMissing as exc:
        pytest.skip(str(exc))


def test_nothing_on_the_text_only_path_needs_torchaudio():
    """The modules a text-only engine run loads (vLLM's engine, worker and model runner, the Qwen3 and Qwen3-MoE model
    classes through vLLM's registry, its processor and multimodal registries, OpenRLHF's engine actor and worker
    extension) import without torchaudio installed: no module-level import needs it (vLLM's are in its audio models
    and processors, loaded by architecture name)."""
    _real_vllm()
    done = subprocess.run([sys.executable, "-c", TEXT_ONLY_PATH], env=vllm_cpu.environment(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_an_installed_torchaudio_is_loaded_by_every_vllm_process(tmp_path):
    """Why an unpaired torchaudio is not inert: transformers imports torchaudio at module level whenever it is
    installed (audio_utils.py:57-58 in 5.15.0 and 5.19.0), and vLLM reaches that module when it loads its config. A
    stand-in torchaudio that records its import and then fails shows it (and makes the text-only path fail)."""
    _real_vllm()
    trap = tmp_path / "trap" / "torchaudio"
    trap.mkdir(parents=True)
    record = tmp_path / "imported.txt"
    trap.joinpath("__init__.py").write_text(
        "import traceback\n"
        f"open({str(record)!r}, 'a').write(''.join(traceback.format_stack()))\n"
        "raise ImportError('a torchaudio that does not load')\n")
    env = vllm_cpu.environment({**os.environ, "PYTHONPATH": str(tmp_path / "trap")})
    done = subprocess.run([sys.executable, "-c", TEXT_ONLY_PATH, "--trap"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode != 0 and "a torchaudio that does not load" in done.stderr
    stack = record.read_text()
    assert "transformers/audio_utils.py" in stack and "vllm/transformers_utils/config.py" in stack

"""The cluster preflight (spade.rlhf.preflight) on this CPU: its versions report, the engine-side probe of a real vLLM
worker (on a stand-in worker with WorkerWrap's call shape), the multi-worker sync check, and the config guard. The
training itself needs an 8-GPU node; `snakemake --profile slurm preflight -n` is planned in test_workflow_dag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch

from spade.rlhf import preflight
from spade.rlhf.cpu import probes
from spade.rlhf.cpu.checks import IntegrationError, check_weight_sync
from spade.rlhf.script import image_prefix

ROOT = Path(__file__).resolve().parents[1]


def test_versions_reads_gpus_infiniband_and_packages(tmp_path, monkeypatch):
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")

    def fake_smi(cmd, **kwargs):
        assert cmd[0] == "nvidia-smi"
        return SimpleNamespace(returncode=0, stdout="NVIDIA H200, 570.86.15, 143771 MiB\n" * 2)

    facts = preflight.versions(tmp_path, fake_smi)
    assert facts["gpus"] == [{"name": "NVIDIA H200", "driver": "570.86.15", "memory": "143771 MiB"}] * 2
    assert facts["infiniband"] == [{"device": "mlx5_0", "ports": {"1": "4: ACTIVE"}}]
    assert facts["nccl_env"] == {"NCCL_IB_HCA": "mlx5_0"}
    assert facts["packages"]["torch"] == torch.__version__ and facts["packages"]["vllm"] is None

    def no_smi(cmd, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    bare = preflight.versions(tmp_path / "none", no_smi)
    assert bare["gpus"] is None and bare["infiniband"] == [] and bare["cuda_devices"] == 0


class _Model:
    def __init__(self):
        self.loaded = {}

    def load_weights(self, weights):
        for name, tensor in weights:
            self.loaded[name] = tensor.clone()


def _worker_module(corrupt: str = "") -> ModuleType:
    """A module with OpenRLHF's WorkerWrap call shape: the weight arrives (here: a handle holding it) and goes to
    ``self.model_runner.model.load_weights``; ``corrupt`` names a weight the worker changes before loading."""
    module = ModuleType("fake_worker_wrap")

    class WorkerWrap:
        def __init__(self):
            self.model_runner = SimpleNamespace(model=_Model())

        def update_weight(self, name, dtype, shape, empty_cache=False):
            raise AssertionError("the CUDA IPC path is used here")

        def update_weight_cuda_ipc(self, name, dtype, shape, ipc_handles=None, empty_cache=False):
            weight = ipc_handles[0]
            if name == corrupt:
                weight = weight + 1
            self.model_runner.model.load_weights(weights=[(name, weight)])

    module.WorkerWrap = WorkerWrap
    return module


def _sync(workers, weights: dict) -> None:
    names = list(weights)
    for worker in workers:
        for i, name in enumerate(names):
            worker.update_weight_cuda_ipc(name, dtype=torch.bfloat16, shape=weights[name].shape,
                                          ipc_handles={0: weights[name]}, empty_cache=i == len(names) - 1)


def _run_syncs(tmp_path, monkeypatch, corrupt: str = "") -> Path:
    records = tmp_path / "records"
    monkeypatch.setenv(probes.RECORDS_ENV, str(records))
    module = _worker_module(corrupt)
    probes.patch_worker_received(module)
    # each engine worker is its own process in a real run: the probe keys records by pid
    workers = [module.WorkerWrap(), module.WorkerWrap()]
    pids = iter([101, 202, 101, 202])  # per sync: worker 0 then worker 1
    monkeypatch.setattr(probes.os, "getpid", lambda: next(pids))
    generator = torch.Generator().manual_seed(0)
    for step in range(2):
        weights = {name: torch.randn(3, 4, generator=generator).to(torch.bfloat16) for name in ("a.weight", "b.bias")}
        checksum = probes.weights_checksum(weights.items())
        probes.record("actor_sync", {"sync": step + 1, "params": 2, "checksum": checksum})
        _sync(workers, weights)
        for worker in workers:
            assert set(worker.model_runner.model.loaded) == set(weights)  # the real loader still ran
            assert "load_weights" not in worker.model_runner.model.__dict__  # the recording wrapper is gone
    return records


def test_engine_workers_record_the_weights_they_received(tmp_path, monkeypatch):
    records = _run_syncs(tmp_path, monkeypatch)
    rows = probes.read_records(records, "engine_sync")
    assert [(row["sync"], row["worker"], row["params"]) for row in rows] == [(1, 101, 2), (1, 202, 2),
                                                                            (2, 101, 2), (2, 202, 2)]
    result = check_weight_sync(records, 2, 2)
    assert [row["workers"] for row in result] == [2, 2] and len({row["checksum"] for row in result}) == 2


def test_check_weight_sync_fails_on_a_changed_weight_a_missing_worker_and_a_still_policy(tmp_path, monkeypatch):
    records = _run_syncs(tmp_path, monkeypatch, corrupt="b.bias")  # mutation: a worker loads another tensor
    with pytest.raises(IntegrationError, match="engine worker 101 received"):
        check_weight_sync(records, 2, 2)
    with pytest.raises(IntegrationError, match="2 worker processes, 8 expected"):
        check_weight_sync(records, 2, 8)
    still = tmp_path / "still"
    still.mkdir()
    rows = probes.read_records(records, "actor_sync")
    (still / "actor_sync.jsonl").write_text("".join(json.dumps(dict(row, checksum="same")) + "\n" for row in rows))
    (still / "engine_sync.jsonl").write_text("".join(json.dumps({"sync": r["sync"], "worker": 1, "checksum": "same"})
                                                     + "\n" for r in rows))
    with pytest.raises(IntegrationError, match="did not change the policy"):
        check_weight_sync(still, 2, 1)


def test_the_preflight_refuses_a_config_that_is_not_one_openrlhf_node(tmp_path):
    with pytest.raises(IntegrationError, match="openrlhf.enabled is False"):
        preflight.run(tmp_path, (ROOT / "configs" / "default.yaml",))  # the toy: the local trainer
    two = tmp_path / "two.yaml"
    two.write_text("openrlhf: {num_nodes: 2, actor_num_nodes: 2, ref_num_nodes: 2}\n")
    with pytest.raises(IntegrationError, match="openrlhf.num_nodes 2"):
        preflight.run(tmp_path, (*preflight.CONFIGS, two))


def test_a_node_without_gpus_stops_the_preflight_with_what_it_found(tmp_path, monkeypatch):
    """Before the guards, the MoE step and the model download: a node whose torch sees fewer CUDA devices than
    openrlhf.gpus_per_node (a CPU node; the local SLURM's fake GPUs) stops with that, and report.json says so."""
    facts = {"packages": {"torch": "2.13.0+cpu"}, "gpus": None, "cuda_devices": 0}
    monkeypatch.setattr(preflight, "versions", lambda: facts)
    monkeypatch.setattr(preflight, "moe_step", lambda *a, **k: pytest.fail("the MoE step ran on a node without GPUs"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    with pytest.raises(IntegrationError, match=r"this node has 0 CUDA device\(s\) that torch 2.13.0\+cpu can use "
                                               r"\(nvidia-smi: none; CUDA_VISIBLE_DEVICES='0,1,2,3,4,5,6,7'\), and the "
                                               r"preflight trains on openrlhf.gpus_per_node = 8"):
        preflight.run(tmp_path)
    assert json.loads((tmp_path / "report.json").read_text())["failed"] == "no GPUs"
    preflight.require_gpus(tmp_path, {**facts, "cuda_devices": 8}, 8)  # enough: nothing raised


def test_the_training_command_and_environment(tmp_path):
    cmd = preflight.train_command(preflight.CONFIGS, tmp_path / "model", tmp_path / "run", "img.sif", "--nv --bind /x")
    assert cmd[1:6] == ["-m", "spade.cli", "train", "--backend", "openrlhf"]
    assert cmd[-3:] == ["--image", "img.sif", "--apptainer-args=--nv --bind /x"]
    env = preflight.environment(tmp_path / "records", {"PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(preflight.SITE), "/elsewhere"]
    assert env[probes.RECORDS_ENV] == str(tmp_path / "records")


def test_the_image_keeps_repository_folders_of_the_pythonpath_only(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(preflight.SITE), "/usr/lib/host-packages"]))
    argv = image_prefix("img.sif", "--nv", ["/data"])
    path = argv[argv.index("--env") + 1].removeprefix("PYTHONPATH=").split(os.pathsep)
    assert path == [str(preflight.SITE), str(ROOT / "src")]


def test_the_preflight_site_installs_the_probes_and_no_cuda_stand_in():
    code = """
import torch
from openrlhf.trainer.ray.vllm_worker_wrap import WorkerWrap
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
print(hasattr(WorkerWrap.update_weight_cuda_ipc, '__wrapped__'), hasattr(WorkerWrap.update_weight, '__wrapped__'),
      hasattr(RemoteExperienceMaker.compute_advantages_and_returns, '__wrapped__'))
try:
    torch.cuda.set_device(0)
    print('patched')
except Exception:
    print('unpatched')
"""
    from spade.rlhf import vllm_cpu
    from spade.rlhf.cpu import SITE as CPU_SITE

    # the CPU run's flash_attn helpers and the real vLLM (setup.sh's .venv/vllm-cpu) after the preflight site, only so
    # that OpenRLHF's modules import here; the first sitecustomize on the path (the preflight's) is the one Python runs
    env = preflight.environment(Path("/tmp/unused"), vllm_cpu.environment({**os.environ, "PYTHONPATH": str(CPU_SITE)}))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["True True True", "unpatched"]  # after DeepSpeed's log lines


def test_moe_step_runs_apart_and_fails_with_its_reason(tmp_path):
    """The preflight's MoE step runs ``spade.rlhf.moe_check`` in its own process (in the image when there is one) and
    stops the preflight with the step's own message when the decode after the sync back differs."""
    from spade.rlhf.cpu.checks import IntegrationError
    from spade.rlhf.preflight import moe_step

    calls = []

    def fake(result, returncode):
        def run(cmd, **kwargs):
            calls.append(cmd)
            folder = Path(cmd[cmd.index("--out") + 1])
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "moe_sync.json").write_text(json.dumps(result))
            return subprocess.CompletedProcess(cmd, returncode, "", "")
        return run

    good = {"moe_backends": ["TRITON"], "moe_backend_asked": "auto", "equal": True, "changed_by_b": True, "first": []}
    assert moe_step(tmp_path, run=fake(good, 0)) == {key: good[key] for key in
                                                     ("moe_backends", "moe_backend_asked", "equal", "changed_by_b")}
    assert calls[-1][:3] == [sys.executable, "-m", "spade.rlhf.moe_check"]
    moe_step(tmp_path, image="img.sif", run=fake(good, 0))
    assert calls[-1][:2] == ["apptainer", "exec"] and calls[-1][-5:-3] == ["python", "-m"]
    bad = {"equal": False, "error": "a tiny Qwen3-MoE synced B then A back decodes 3 of 8 prompts otherwise"}
    with pytest.raises(IntegrationError, match="MoE step failed .*decodes 3 of 8 prompts otherwise"):
        moe_step(tmp_path, run=fake(bad, 1))
    assert json.loads((tmp_path / "report.json").read_text())["failed"] == "moe sync"

"""The cluster preflight: ``snakemake --profile slurm preflight`` (``python -m spade.rlhf.preflight --out DIR``).

Before the paper's jobs start, one node runs a short SPADE training through the real GPU path: ``spade train
--backend openrlhf`` with ``configs/preflight.yaml`` over ``configs/default.yaml`` (a small Qwen3 on the node's 8 GPUs
with the paper presets: engines colocated with the actor, weights synced over CUDA IPC, ZeRO-3). OpenRLHF, vLLM,
DeepSpeed and Ray run unchanged; the only addition is the probes' records (``spade.rlhf.cpu.probes.GPU_PATCHES``,
installed through ``preflight_site/`` on the run's PYTHONPATH), which the checks of the CPU integration run
(``spade.rlhf.cpu.checks``) then read:

- after every weight sync, the weights the engines received equal the DeepSpeed actor's, bit for bit (checksums on
  both sides; under ZeRO-3 the actor's are gathered first). What vLLM's loader does with them is shown by OpenRLHF's
  ``logprobs_diff`` and ``vllm_kl`` on the steps after a sync, which must be finite;
- the rewards we sent are those OpenRLHF logged, and at least half of its prompt groups have a nonzero advantage;
- the advantages OpenRLHF trained on equal the rewards our executor returned, sample by sample.

Before the training (and before the model download) the environment guards (``spade.rlhf.guards``) check the node:
``kernel.yama.ptrace_scope`` and ``expandable_segments`` under the CUDA-IPC sync, the NCCL settings the trainer and the
engines will see, the socket paths under ``TMPDIR``; one that fails stops the preflight with its fix, and
``report.json`` records what each saw.

Then the MoE step (``spade.rlhf.moe_check``, in a process of its own): a tiny random Qwen3-MoE in a real vLLM engine,
synced with other weights and back through the layerwise reload the GPU path uses, must decode as it did first, with
the MoE backend vLLM picks on the node (``report.json``: ``moe_sync``). The training's own dense model cannot show an
MoE problem; this step does, before ``all`` starts.

``versions.json`` records what the node runs: GPUs, driver, CUDA, NCCL, InfiniBand devices and the versions of
torch, vLLM, OpenRLHF, DeepSpeed, Ray and transformers, read inside the image when the run uses one. ``report.json``
holds the checks. Nothing here has run on a GPU yet (docs/OPENRLHF.md, "Preflight").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from spade.rlhf.cpu.checks import (IntegrationError, check_engine_logprobs, check_finite, check_greedy_after_sync,
                                   check_nonzero_groups, check_params_moved, check_rewards, check_trained_advantages,
                                   check_weight_sync, moe_backends_seen)
from spade.rlhf.cpu.probes import RECORDS_ENV
from spade.rlhf.guards import PID_MAX, PTRACE_SCOPE, environment_guards, failures

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = (ROOT / "configs" / "default.yaml", ROOT / "configs" / "preflight.yaml")
SITE = Path(__file__).resolve().parent / "preflight_site"
PACKAGES = ("torch", "vllm", "openrlhf", "deepspeed", "ray", "transformers", "flash-attn", "spade")


def versions(sys_root: Path = Path("/sys"), run=subprocess.run) -> dict:
    """What this process's node and Python run: GPUs and driver (``nvidia-smi``), CUDA and NCCL as torch sees them,
    InfiniBand devices and port states (``/sys/class/infiniband``), package versions and ``NCCL_*`` variables.
    A missing piece is ``None``, never an error: the report says what is there."""
    facts = {"host": platform.node(), "python": platform.python_version(),
             "packages": {name: _version(name) for name in PACKAGES},
             "nccl_env": {key: value for key, value in sorted(os.environ.items()) if key.startswith("NCCL_")}}
    try:
        done = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                   capture_output=True, text=True, timeout=60)
        rows = [[part.strip() for part in line.split(",")] for line in done.stdout.splitlines() if line.strip()]
        facts["gpus"] = [dict(zip(("name", "driver", "memory"), row)) for row in rows] if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        facts["gpus"] = None
    try:
        import torch

        facts["torch_cuda"] = torch.version.cuda
        facts["cuda_devices"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
        nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
        facts["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
    except ImportError:
        facts.update(torch_cuda=None, cuda_devices=0, nccl=None)
    facts["infiniband"] = _infiniband(Path(sys_root) / "class" / "infiniband")
    return facts


def _version(name: str):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _infiniband(folder: Path) -> list:
    """[{device, ports: {port: state}}] from sysfs; [] without InfiniBand."""
    devices = []
    for device in sorted(folder.iterdir()) if folder.is_dir() else []:
        ports = {}
        for port in sorted((device / "ports").iterdir()) if (device / "ports").is_dir() else []:
            state = port / "state"
            ports[port.name] = state.read_text().strip() if state.is_file() else None
        devices.append({"device": device.name, "ports": ports})
    return devices


def environment(records: Path, base: dict | None = None) -> dict:
    """The training's process environment: ``preflight_site/`` first on PYTHONPATH (the probes), records to
    ``records``. Ray's workers and the processes in the image inherit it (srun and apptainer pass the environment)."""
    env = dict(os.environ if base is None else base)
    paths = [str(SITE)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE)]
    env.update({"PYTHONPATH": os.pathsep.join(paths), RECORDS_ENV: str(records)})
    return env


def train_command(configs, model: Path, run_dir: Path, image: str = "", apptainer_args: str = "--nv") -> list:
    """The CPU run's training command (``spade.rlhf.cpu.run.train_command``), in ``image`` when one is given."""
    from spade.rlhf.cpu.run import train_command as plain

    cmd = plain(configs, model, run_dir)
    return cmd + (["--image", image, f"--apptainer-args={apptainer_args}"] if image else [])


def image_versions(image: str, apptainer_args: str, run=subprocess.run) -> dict:
    """``versions()`` read inside the image (where the GPU stack is), through ``apptainer exec``."""
    from spade.rlhf.script import image_prefix

    cmd = image_prefix(image, apptainer_args, [str(ROOT)]) + ["python", "-m", "spade.rlhf.preflight", "--versions"]
    done = run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise IntegrationError(f"reading versions in the image failed ({shlex.join(cmd)}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def require_gpus(out: Path, facts: dict, wanted: int) -> None:
    """The point where the preflight needs real GPUs: torch on this node must see ``wanted`` CUDA devices
    (openrlhf.gpus_per_node). A node without them (a CPU node, a SLURM job whose GPUs are not real, as on the local
    cluster of scripts/local_slurm.sh) writes ``report.json`` and stops with what it found, before any model
    download or engine start."""
    from spade.io import atomic_write_json

    seen = facts.get("cuda_devices") or 0
    if seen >= wanted:
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    atomic_write_json(out / "report.json", {"failed": "no GPUs", "cuda_devices": seen, "wanted": wanted,
                                            "cuda_visible_devices": visible, "gpus": facts.get("gpus")})
    raise IntegrationError(
        f"this node has {seen} CUDA device(s) that torch {facts['packages'].get('torch')} can use "
        f"(nvidia-smi: {facts.get('gpus') or 'none'}; CUDA_VISIBLE_DEVICES={visible!r}), and the preflight trains on "
        f"openrlhf.gpus_per_node = {wanted}. Run it on a GPU node of the cluster (snakemake --profile slurm "
        f"preflight); {out / 'versions.json'} records what this node has")


def run_guards(config, out: Path, facts: dict, env: dict, ptrace_scope: Path = PTRACE_SCOPE,
               pid_max: Path = PID_MAX) -> list:
    """The environment guards for the training's environment ``env`` on this node, with the vLLM and NCCL versions
    the node runs (``facts``, from ``versions``); a failure writes ``report.json`` with every guard and raises."""
    from spade.io import atomic_write_json

    guards = environment_guards(config, env, ptrace_scope, pid_max, (facts.get("packages") or {}).get("vllm"),
                                facts.get("nccl"))
    if failures(guards):
        atomic_write_json(out / "report.json", {"guards": [guard.as_dict() for guard in guards],
                                                "failed": "environment guards"})
        raise IntegrationError("the node's environment would fail the training (docs/OPENRLHF.md, \"Preflight\"):\n"
                               + failures(guards))
    return guards


def moe_step(out: Path, image: str = "", apptainer_args: str = "--nv", run=subprocess.run) -> dict:
    """The MoE step (``spade.rlhf.moe_check``) in a process of its own, in ``image`` when one is given: a tiny random
    Qwen3-MoE synced with other weights and back must decode as before, with the MoE backend vLLM picks on this node.
    Returns what it found (backends, equal); a failure writes ``report.json`` and raises."""
    from spade.io import atomic_write_json
    from spade.rlhf.script import image_prefix

    folder = out / "moe"
    args = ["-m", "spade.rlhf.moe_check", "--out", str(folder)]
    cmd = image_prefix(image, apptainer_args, [str(ROOT), str(out)]) + ["python", *args] if image \
        else [sys.executable, *args]
    done = run(cmd, capture_output=True, text=True, timeout=1800)
    found = folder / "moe_sync.json"
    result = json.loads(found.read_text()) if found.is_file() else {}
    if done.returncode != 0 or not result.get("equal"):
        atomic_write_json(out / "report.json", {"failed": "moe sync", "moe_sync": result})
        raise IntegrationError(f"the MoE step failed ({shlex.join(cmd)}, exit {done.returncode}): "
                               f"{result.get('error') or done.stderr[-2000:]}")
    return {key: result[key] for key in ("moe_backends", "moe_backend_asked", "equal", "changed_by_b")}


def run(out: Path, configs=CONFIGS, image: str = "", apptainer_args: str = "--nv", timeout_s: float = 7200) -> dict:
    from spade.config import load_config
    from spade.inference.models import prepare_model
    from spade.io import atomic_write_json

    config = load_config(*configs)
    placement = config.openrlhf
    if not placement.enabled or placement.num_nodes != 1:
        raise IntegrationError(f"the preflight runs OpenRLHF on one node: config key openrlhf.enabled is "
                               f"{placement.enabled} and openrlhf.num_nodes {placement.num_nodes} (need true and 1) "
                               f"in {', '.join(map(str, configs))}")
    out = Path(out).resolve()
    for stale in ("run", "records", "train.log", "versions.json", "report.json", "moe"):
        path = out / stale
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    facts = image_versions(image, apptainer_args) if image else versions()
    atomic_write_json(out / "versions.json", facts)
    require_gpus(out, facts, placement.gpus_per_node)
    records, run_dir = out / "records", out / "run"
    guards = run_guards(config, out, facts, environment(records))
    moe = moe_step(out, image, apptainer_args)
    model = prepare_model(config.model, out / "model")
    cmd = train_command(configs, model, run_dir, image, apptainer_args)
    started = time.monotonic()
    with (out / "train.log").open("w", encoding="utf-8") as log:
        done = subprocess.run(cmd, env=environment(records), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                              timeout=timeout_s)
    seconds = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        raise IntegrationError(f"the preflight training failed (exit {done.returncode}); log: {out / 'train.log'}")
    steps = config.selfplay.total_steps
    report = {
        "config": [str(p) for p in configs], "model": str(model), "train_seconds": seconds, "versions": facts,
        "guards": [guard.as_dict() for guard in guards],
        "rewards": check_rewards(run_dir, steps, config.train.global_batch),
        "finite_diagnostics": check_finite(run_dir, steps),
        "nonzero_advantage_groups": check_nonzero_groups(records),
        "weight_sync": check_weight_sync(records, steps,
                                         placement.vllm_num_engines * placement.vllm_tensor_parallel_size),
        "trained_advantages": check_trained_advantages(records),
        "greedy_after_sync": check_greedy_after_sync(records),
        "engine_logprobs": check_engine_logprobs(records),
        "params_moved": check_params_moved(records),
        "moe_backends": moe_backends_seen(records),
        "moe_sync": moe,
    }
    atomic_write_json(out / "report.json", report)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spade.rlhf.preflight", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="output folder (model, run, records, versions.json, report.json)")
    parser.add_argument("--config", action="append",
                        help="config files, in order (default: configs/default.yaml configs/preflight.yaml)")
    parser.add_argument("--image", default="", help="the Apptainer image of the GPU stack (spade train --image)")
    parser.add_argument("--apptainer-args", default="--nv", help="flags of every apptainer exec (default: --nv)")
    parser.add_argument("--versions", action="store_true", help="print this node's versions as JSON and exit")
    args = parser.parse_args(argv)
    if args.versions:
        print(json.dumps(versions(), indent=2))
        return 0
    if not args.out:
        parser.error("--out is required (unless --versions)")
    try:
        report = run(Path(args.out), tuple(Path(p) for p in args.config) if args.config else CONFIGS,
                     args.image, args.apptainer_args)
    except IntegrationError as exc:
        print(f"preflight: FAILED: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"train_seconds": report["train_seconds"], "weight_sync": report["weight_sync"],
                      "nonzero_advantage_groups": report["nonzero_advantage_groups"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

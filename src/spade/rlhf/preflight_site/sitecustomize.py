"""Started by Python in every process of a preflight run (``spade.rlhf.preflight``; this folder is on its PYTHONPATH
only): installs the probes' records (``spade.rlhf.cpu.probes.GPU_PATCHES``), no CUDA stand-in, then what the paper
runs' site folder installs (``spade/rlhf/engine_site``, which this file shadows): the GPU weight sync through vLLM's
layerwise reload, wrapped around the probes' record of what each worker received, and the rollout log-prob patch for
the mode in ``SPADE_ROLLOUT_LOGPROBS``."""

from spade.import_hooks import add_patches
from spade.inference.vllm_logprobs import patches_from_env
from spade.rlhf.cpu.probes import GPU_PATCHES
from spade.rlhf.weight_sync import SYNC_PATCHES

add_patches(GPU_PATCHES)
add_patches(SYNC_PATCHES)
add_patches(patches_from_env())

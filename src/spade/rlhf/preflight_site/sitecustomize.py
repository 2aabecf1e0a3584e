"""Started by Python in every process of a preflight run (``spade.rlhf.preflight``; this folder is on its PYTHONPATH
only): installs the probes' records (``spade.rlhf.cpu.probes.GPU_PATCHES``), no CUDA stand-in, and the rollout
log-prob patch of vLLM's samplers for the mode in ``SPADE_ROLLOUT_LOGPROBS`` (``spade.inference.vllm_logprobs``; this
file shadows ``spade/rlhf/engine_site``'s, which the launch script puts later on the path)."""

from spade.inference.vllm_logprobs import patches_from_env
from spade.rlhf.cpu.patches import install
from spade.rlhf.cpu.probes import GPU_PATCHES

install(GPU_PATCHES)
install(patches_from_env())

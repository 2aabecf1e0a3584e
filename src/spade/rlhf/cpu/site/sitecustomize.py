"""Started by Python in every process of the CPU integration run (this folder is on its PYTHONPATH only):
installs the CPU patches of ``spade.rlhf.cpu.patches`` before anything imports torch or OpenRLHF, and the rollout
log-prob patch of vLLM's samplers for the mode in ``SPADE_ROLLOUT_LOGPROBS`` (``spade.inference.vllm_logprobs``;
this file shadows ``spade/rlhf/engine_site``'s, which the launch script puts later on the path)."""

from spade.inference.vllm_logprobs import patches_from_env
from spade.rlhf.cpu.patches import install

install()
install(patches_from_env())

"""Started by Python in every process of a paper run whose launch script put this folder on PYTHONPATH
(``train.rollout_logprobs: reference``, ``spade.rlhf.script``): installs the rollout log-prob patch of vLLM's samplers
(``spade.inference.vllm_logprobs``) for the mode in ``SPADE_ROLLOUT_LOGPROBS``, and nothing else."""

from spade.import_hooks import add_patches
from spade.inference.vllm_logprobs import patches_from_env

add_patches(patches_from_env())

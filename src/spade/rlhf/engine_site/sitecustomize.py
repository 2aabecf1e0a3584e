"""Started by Python in every process of a GPU run whose launch script put this folder on PYTHONPATH
(``spade.rlhf.script``): installs, on import of their modules, the GPU weight sync through vLLM's layerwise reload
(``spade.rlhf.weight_sync.SYNC_PATCHES``) and the rollout log-prob patch of vLLM's samplers for the mode in
``SPADE_ROLLOUT_LOGPROBS`` (``spade.inference.vllm_logprobs``), and nothing else."""

from spade.import_hooks import add_patches
from spade.inference.vllm_logprobs import patches_from_env
from spade.rlhf.weight_sync import SYNC_PATCHES

add_patches(SYNC_PATCHES)
add_patches(patches_from_env())

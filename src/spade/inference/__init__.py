"""Models and generation backends: token-id prompts in, sampled tokens and log-probs out.

``models`` prepares base models as offline Hugging Face folders; ``generation`` defines the backend interface;
``generation_hf`` (CPU or one GPU, sharing weights with the local trainer, with ``hf_decode``'s decode kernels) and
``generation_vllm`` (vLLM's offline engine) implement it. The self-play core and the evaluation harness use only
the interface.
"""

"""A stand-in for the two flash-attn modules OpenRLHF 0.11.2 imports at module level
(``openrlhf/models/ring_attn_utils.py`` lines 3-4), for the CPU integration run only (``spade.rlhf.cpu``).
flash-attn is a CUDA extension; the helpers imported are plain tensor bookkeeping, written here in torch.
Our runs use ``--ds.attn_implementation sdpa`` without sample packing, so no flash kernel is ever asked for."""

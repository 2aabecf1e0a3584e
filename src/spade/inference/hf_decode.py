"""Two decode-time savings for the HF backend on models with grouped-query attention (issue 17).

Measured with SmolLM2-135M (9 query heads share 3 key/value heads) on 2 CPU cores at batch 8 and 1.5k context,
``transformers``' own SDPA path spends most of a decode step copying keys and values rather than computing:

1. **Grouped attention without copies** (``grouped_sdpa``). With a padding mask, ``transformers`` expands every
   key/value head to its query heads (``repeat_kv``: a copy of the whole cache, per layer, per step) because
   ``enable_gqa`` with a mask is not used on CPU. Here a single-token query folds its ``g`` query heads of one group
   into ``g`` query rows against the group's own key/value head (exactly the same dot products and softmax per row);
   longer queries use ``enable_gqa``. Outputs equal the stock path up to float rounding (``tests/test_hf_decode.py``).
2. **A preallocated cache** (``PreallocatedLayer``). ``DynamicCache`` grows with ``torch.cat``, which copies the
   whole cache of every layer at every step (quadratic in the sampled length). These layers write each step into a
   buffer sized for prompt + ``max_new_tokens`` and hand attention a view of the filled part.

``grouped_attention(model)`` switches a model that uses the stock ``"sdpa"`` implementation to ``grouped_sdpa`` for
the duration of a call and restores it afterwards; any other implementation (eager, flash) is left alone.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers.cache_utils import DynamicLayer

ATTENTION_NAME = "spade_grouped_sdpa"
_registered = False


def grouped_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None,
                 **kwargs):
    """Attention over ``query [B, H, Q, D]`` and ``key``/``value [B, Hkv, K, D]`` with ``H = g * Hkv``; query head
    ``j * g + r`` reads key/value head ``j`` (``transformers``' ``repeat_kv`` convention). Returns ``[B, Q, H, D]``."""
    batch, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads do not split into groups over {kv_heads} key/value heads")
    groups = heads // kv_heads
    dropout = dropout if module.training else 0.0
    if q_len == 1 and groups > 1:
        # one query token: its g heads of group j become g query rows against key/value head j (mask [B, 1, 1, K]
        # broadcasts over the rows)
        folded = query.reshape(batch, kv_heads, groups, dim)
        out = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=attention_mask,
                                                               dropout_p=dropout, scale=scaling)
        return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(q_len > 1 and attention_mask is None and causal)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           dropout_p=dropout, scale=scaling, is_causal=causal,
                                                           enable_gqa=groups > 1)
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    global _registered
    if not _registered:
        from transformers import AttentionInterface, AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask

        AttentionInterface.register(ATTENTION_NAME, grouped_sdpa)
        AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)  # the same masks as the stock SDPA path
        _registered = True


@contextmanager
def grouped_attention(model):
    """Use ``grouped_sdpa`` inside the block when the model runs the stock ``"sdpa"`` attention."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current != "sdpa":
        yield
        return
    _register()
    model.set_attn_implementation(ATTENTION_NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(current)


class PreallocatedLayer(DynamicLayer):
    """A full-attention cache layer that writes into a buffer of ``capacity`` positions instead of concatenating.

    ``keys``/``values`` are views ``[B, Hkv, n, D]`` of the filled part; a write past the capacity doubles the buffer
    (never needed when the capacity is prompt + ``max_new_tokens``, kept so a longer use stays correct)."""

    def __init__(self, capacity: int):
        super().__init__()
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.length = 0

    def lazy_initialization(self, key_states, value_states) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self._keys = key_states.new_empty(key_states.shape[:2] + (self.capacity, key_states.shape[3]))
        self._values = value_states.new_empty(value_states.shape[:2] + (self.capacity, value_states.shape[3]))
        self.is_initialized = True

    def _views(self) -> None:
        self.keys = self._keys[:, :, :self.length]
        self.values = self._values[:, :, :self.length]

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            grown = max(end, 2 * self._keys.shape[-2])
            for name in ("_keys", "_values"):
                old = getattr(self, name)
                new = old.new_empty(old.shape[:2] + (grown, old.shape[3]))
                new[:, :, :self.length] = old[:, :, :self.length]
                setattr(self, name, new)
        self._keys[:, :, self.length:end] = key_states
        self._values[:, :, self.length:end] = value_states
        self.length = end
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def reset(self) -> None:
        super().reset()
        self.length = 0

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)  # shortens the views; the buffer keeps its place for the next write
        if self.is_initialized:
            self.length = self.keys.shape[-2]

    def batch_select_indices(self, indices) -> None:
        if self.is_initialized:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._views()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._keys = self._keys.repeat_interleave(repeats, dim=0)
            self._values = self._values.repeat_interleave(repeats, dim=0)
            self._views()


def preallocated_cache(model, capacity: int, layers=None):
    """A ``DynamicCache`` of ``PreallocatedLayer``s of ``capacity`` positions; ``layers`` (``[(keys [B, Hkv, L, D],
    values)]`` per layer) fills its first ``L`` positions."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    cache.layers = [PreallocatedLayer(capacity) for _ in cache.layers]
    for layer, (keys, values) in zip(cache.layers, layers or []):
        layer.update(keys, values)
    return cache

"""Pure-torch ``index_first_axis``, ``unpad_input``, ``pad_input`` (and einops' ``rearrange``, which
``ring_attn_utils.py`` imports from here), with flash-attn's signatures."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange  # noqa: F401  (re-exported: ring_attn_utils imports it from this module)


def index_first_axis(tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Rows ``indices`` of ``tensor`` along its first axis."""
    return tensor.index_select(0, indices)


def unpad_input(hidden_states: torch.Tensor, attention_mask: torch.Tensor, unused_mask=None):
    """[B, S, ...] states and a [B, S] mask -> (kept tokens [N, ...], their flat indices [N], cumulative
    sequence lengths [B + 1] (int32), longest sequence, per-row lengths [B] (int32))."""
    mask = attention_mask if unused_mask is None else attention_mask + unused_mask
    lengths = mask.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return index_first_axis(flat, indices), indices, cu_seqlens, int(lengths.max().item()), used


def pad_input(hidden_states: torch.Tensor, indices: torch.Tensor, batch: int, seqlen: int) -> torch.Tensor:
    """Inverse of ``unpad_input``: [N, ...] kept tokens -> [batch, seqlen, ...] with zeros elsewhere."""
    out = hidden_states.new_zeros((batch * seqlen, *hidden_states.shape[1:]))
    out[indices] = hidden_states
    return out.reshape(batch, seqlen, *hidden_states.shape[1:])

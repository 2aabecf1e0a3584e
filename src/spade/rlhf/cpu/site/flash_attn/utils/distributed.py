"""Pure-torch ``all_gather`` with flash-attn's signature: every rank's tensor, concatenated on dim 0."""

from __future__ import annotations

import torch
import torch.distributed as dist


def all_gather(input_: torch.Tensor, process_group) -> torch.Tensor:
    world = dist.get_world_size(process_group)
    parts = [torch.empty_like(input_) for _ in range(world)]
    dist.all_gather(parts, input_.contiguous(), group=process_group)
    return torch.cat(parts, dim=0)

"""``PyNcclCommunicator.broadcast`` over the gloo group of ``StatelessProcessGroup`` (stand-in, see
``vllm/__init__``): OpenRLHF calls it with ``--vllm.sync_backend`` on both sides of the weight sync."""

from __future__ import annotations


class PyNcclCommunicator:
    def __init__(self, group, device=None):
        self.group = group
        self.rank, self.world_size = group.rank, group.world_size

    def broadcast(self, tensor, src: int, stream=None):
        import torch.distributed as dist

        options = dist.BroadcastOptions()
        options.rootRank = int(src)
        self.group.gloo.broadcast([tensor], options).wait()

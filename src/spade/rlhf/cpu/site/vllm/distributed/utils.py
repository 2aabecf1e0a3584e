"""``StatelessProcessGroup``: a process group outside torch's default one, between OpenRLHF's DeepSpeed rank 0
and its engines, for the weight sync (stand-in, see ``vllm/__init__``). Here it is a real gloo group on a
TCP store: the weights really travel from the trainer process to the engine process."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass
class StatelessProcessGroup:
    rank: int
    world_size: int
    store: object
    gloo: object

    @classmethod
    def create(cls, host: str, port: int, rank: int, world_size: int,
               store_timeout: int = 300) -> "StatelessProcessGroup":
        import torch.distributed as dist

        store = dist.TCPStore(host, int(port), world_size, is_master=(rank == 0),
                              timeout=timedelta(seconds=store_timeout))
        gloo = dist.ProcessGroupGloo(store, rank, world_size, timedelta(seconds=store_timeout))
        return cls(rank, world_size, store, gloo)

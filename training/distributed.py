"""torchrun readiness: rank discovery, rank-0-only side effects, and gathering embeddings with gradients.

Single-process training uses ``DistContext.single()`` and every helper degrades to a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @classmethod
    def single(cls) -> DistContext:
        return cls(0, 1, 0)

    @classmethod
    def from_environment(cls) -> DistContext:
        """Read torchrun's RANK / WORLD_SIZE / LOCAL_RANK; initialise the process group if > 1."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size <= 1:
            return cls.single()
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        return cls(dist.get_rank(), world_size, int(os.environ.get("LOCAL_RANK", "0")))


def gather_with_grad(tensor: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """Concatenate ``tensor`` from all ranks; gradients flow back to this rank's slice.

    Pair-based losses see every rank's embeddings as negatives (the loss spec's
    ``gather_across_ranks``); proxy losses do not need it.
    """
    if not ctx.enabled:
        return tensor
    gathered = [torch.zeros_like(tensor) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, tensor.detach())
    gathered[ctx.rank] = tensor
    return torch.cat(gathered, dim=0)


def average_across_ranks(value: float, ctx: DistContext) -> float:
    if not ctx.enabled:
        return value
    tensor = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(tensor)
    return float(tensor.item()) / ctx.world_size


def broadcast_from_main(value: Any, ctx: DistContext) -> Any:
    """Rank 0's ``value`` on every rank (validation runs on rank 0 only; every rank must agree on
    whether this epoch is the best one and whether to stop)."""
    if not ctx.enabled:
        return value
    holder = [value]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def barrier(ctx: DistContext) -> None:
    if ctx.enabled:
        dist.barrier()

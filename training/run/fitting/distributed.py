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

    Every rank then computes the loss of the whole global batch (see ``global_batch_loss_scale``).
    """
    if not ctx.enabled:
        return tensor
    gathered = [torch.zeros_like(tensor) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, tensor.detach())
    gathered[ctx.rank] = tensor
    return torch.cat(gathered, dim=0)


def global_batch_loss_scale(ctx: DistContext) -> float:
    """Factor for the loss before ``backward`` so that N ranks x B images train exactly like 1 x N*B.

    Each rank computes the same global loss L on the gathered batch, but its backward reaches only
    its own slice of the embeddings; DDP then averages the model's gradients over ranks, giving
    dL/dtheta / N. Scaling L by N undoes that average.
    """
    return float(ctx.world_size)


def sync_loss_parameter_grads(parameters: list[torch.nn.Parameter], ctx: DistContext) -> None:
    """Give the loss's own parameters (proxies, class weights, beta) the global-batch gradient on
    every rank: each rank holds N * dL/dw (the loss was scaled by N), identical up to rounding; the
    all-reduce makes them bit-identical, and dividing the sum by N^2 leaves dL/dw."""
    if not ctx.enabled:
        return
    for parameter in parameters:
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad)
            parameter.grad.div_(ctx.world_size**2)


def same_on_every_rank_seed(seed: int, step: int) -> int:
    """The seed of the loss's randomness (miners, class subsampling) at ``step``: equal on every rank,
    so every rank draws the same random choices for the same global batch."""
    return int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(seed * 1_000_003 + step)))


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

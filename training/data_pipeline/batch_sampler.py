"""Batch samplers: class-balanced C x M batches for pair losses, plain shuffling for proxies.

Both follow ``DistributedSampler``'s epoch semantics: the order of an epoch depends only on
``(seed, epoch)``; call ``set_epoch(e)`` before each epoch or every epoch repeats the same
order. ``len(sampler)`` is the number of batches one rank yields per epoch.

Sharding (``rank``/``world_size``): ``trainer.batch_size`` is the *per-rank* batch, as
in DDP. Every rank computes the same global order; the class-balanced sampler draws
``C * world_size`` distinct classes per global step and rank ``r`` takes classes
``r*C .. (r+1)*C - 1`` with their M images each, so ranks never share a class or an image
within a step. The shuffle sampler permutes all indices and deals them out round-robin.

Classes with fewer than M images (``small_classes``): ``"drop"`` (the default) leaves them
out, since padding puts duplicate images in a batch, i.e. trivially easy positives;
``"pad"`` keeps them, each batch taking all of such a class's images plus repeats drawn with
replacement (like pml's ``MPerClassSampler``), which matters where most classes are small
(Stanford Online Products: many classes of 2-3 images). Rank 0 logs how many classes were
dropped or padded, naming them, in the run log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, TypedDict

import numpy as np

from retrieval.indexing.common.errors import DataError

if TYPE_CHECKING:
    from typing_extensions import Unpack

SmallClasses = Literal["drop", "pad"]


class SamplerOptions(TypedDict, total=False):
    """The keyword options of ``ClassBalancedBatchSampler`` that ``make_batch_sampler`` passes on."""

    batches_per_epoch: int | None
    seed: int
    rank: int
    world_size: int
    class_names: Mapping[int, str] | None
    small_classes: SmallClasses


log = logging.getLogger(__name__)


class _DistinctCycle:
    """An endless stream over ``items`` in reshuffled passes; ``draw(k)`` gives k distinct items.

    Each pass visits every item once. When a pass runs out mid-draw, the draw is completed
    from the next pass, skipping items already in the draw (they are served later in that pass).
    """

    def __init__(self, items: np.ndarray, rng: np.random.Generator) -> None:
        self._items = items
        self._rng = rng
        self._queue = rng.permutation(items)

    def draw(self, k: int) -> np.ndarray:
        taken, self._queue = self._queue[:k], self._queue[k:]
        if len(taken) == k:
            return taken
        fresh = self._rng.permutation(self._items)
        repeated = np.isin(fresh, taken)
        usable = fresh[~repeated]
        need = k - len(taken)
        self._queue = np.concatenate([usable[need:], fresh[repeated]])
        return np.concatenate([taken, usable[:need]])


class _PaddedDraw:
    """``draw(k)`` for a class with fewer than k images: all of them, then k - n repeats drawn
    with replacement, shuffled, so every image is used and no repeat is forced."""

    def __init__(self, items: np.ndarray, rng: np.random.Generator) -> None:
        self._items = items
        self._rng = rng

    def draw(self, k: int) -> np.ndarray:
        repeats = self._rng.choice(self._items, size=k - len(self._items), replace=True)
        return self._rng.permutation(np.concatenate([self._items, repeats]))


def _epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng([seed, epoch])


def _check_shard(rank: int, world_size: int) -> None:
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside 0..{world_size - 1} for world size {world_size}")


class ClassBalancedBatchSampler:
    """Yields batches of ``classes_per_batch`` (C) classes x ``images_per_class`` (M) indices.

    Classes are drawn without replacement inside a global batch, cycling through reshuffled
    passes over all classes; a class's images are drawn without replacement, cycling
    through reshuffled passes over that class (a class smaller than M, kept with
    ``small_classes="pad"``, gives all its images plus repeats). Default ``batches_per_epoch`` =
    floor(images of sampled classes / (C * M * world_size)): about one pass over the data.
    """

    def __init__(
        self,
        labels: Sequence[int],
        *,
        classes_per_batch: int,
        images_per_class: int,
        batches_per_epoch: int | None = None,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        class_names: Mapping[int, str] | None = None,
        small_classes: SmallClasses = "drop",
    ) -> None:
        if classes_per_batch < 1 or images_per_class < 1:
            raise ValueError("classes_per_batch and images_per_class must be at least 1")
        if small_classes not in ("drop", "pad"):
            raise ValueError(f"small_classes must be 'drop' or 'pad', got {small_classes!r}")
        if batches_per_epoch is not None and batches_per_epoch < 1:
            raise ValueError(f"batches_per_epoch must be at least 1, got {batches_per_epoch}")
        _check_shard(rank, world_size)
        self.classes_per_batch = classes_per_batch
        self.images_per_class = images_per_class
        self.seed, self.rank, self.world_size, self.epoch = seed, rank, world_size, 0
        self.small_classes = small_classes
        self._members = self._usable_classes(np.asarray(labels, dtype=np.int64), class_names or {})
        images = sum(len(m) for m in self._members.values())
        self.batches_per_epoch = batches_per_epoch or images // (self.batch_size * world_size)

    @property
    def batch_size(self) -> int:
        return self.classes_per_batch * self.images_per_class

    def _usable_classes(self, labels: np.ndarray, class_names: Mapping[int, str]) -> dict[int, np.ndarray]:
        M, needed, pad = self.images_per_class, self.classes_per_batch * self.world_size, self.small_classes == "pad"
        classes, counts = np.unique(labels, return_counts=True)
        if self.rank == 0:
            self._log_small_classes(classes, counts, class_names)
        usable = len(classes) if pad else int((counts >= M).sum())
        if usable < needed:
            shard = f" ({self.classes_per_batch} per rank x {self.world_size} ranks)" if self.world_size > 1 else ""
            if pad:
                raise DataError(
                    f"the data has only {usable} classes but a batch needs {needed} classes{shard}; "
                    "lower trainer.batch_size or raise data.images_per_class, or add classes"
                )
            raise DataError(
                f"only {usable} classes have at least {M} images but a batch needs {needed} classes{shard}; "
                "lower trainer.batch_size or data.images_per_class, set data.small_classes to pad, or add images"
            )
        groups = np.split(np.argsort(labels, kind="stable"), np.cumsum(counts)[:-1])
        return {int(c): members for c, members in zip(classes, groups) if pad or len(members) >= M}

    def _log_small_classes(self, classes: np.ndarray, counts: np.ndarray, class_names: Mapping[int, str]) -> None:
        M = self.images_per_class
        small = [int(c) for c, n in zip(classes, counts) if n < M]
        if not small:
            return
        shown = ", ".join(repr(class_names.get(c, c)) for c in small[:10]) + (", ..." if len(small) > 10 else "")
        images = int(counts[counts < M].sum())
        if self.small_classes == "pad":
            log.info(
                "class-balanced sampler: padded %d classes with fewer than %d images (%s) by sampling "
                "their %d images with replacement",
                len(small),
                M,
                shown,
                images,
            )
        else:
            log.warning(
                "class-balanced sampler: dropped %d classes with fewer than %d images (%s); their %d images "
                "are never sampled (data.small_classes: pad keeps them)",
                len(small),
                M,
                shown,
                images,
            )

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order ``__iter__`` yields (``DistributedSampler`` semantics)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.batches_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        rng = _epoch_rng(self.seed, self.epoch)
        class_cycle = _DistinctCycle(np.fromiter(self._members, dtype=np.int64), rng)
        C, M = self.classes_per_batch, self.images_per_class
        image_cycles = {
            c: _DistinctCycle(m, rng) if len(m) >= M else _PaddedDraw(m, rng) for c, m in self._members.items()
        }
        for _ in range(self.batches_per_epoch):
            # every rank draws the whole global batch so all ranks consume the rng alike
            global_batch = [image_cycles[int(c)].draw(M) for c in class_cycle.draw(C * self.world_size)]
            yield [int(i) for images in global_batch[self.rank * C : (self.rank + 1) * C] for i in images]


def make_batch_sampler(
    batch_size: int, images_per_class: int, labels: Sequence[int], **options: Unpack[SamplerOptions]
) -> ClassBalancedBatchSampler:
    """A class-balanced sampler with C = ``batch_size // images_per_class`` classes per batch; ``options``
    are the sampler's own (``ClassBalancedBatchSampler``'s defaults)."""
    M = images_per_class
    if batch_size % M:
        lower, upper = batch_size // M * M, (batch_size // M + 1) * M
        choices = f"{lower} or {upper}" if lower >= 2 * M else f"{max(upper, 2 * M)}"
        raise DataError(
            f"batch size {batch_size} is not a multiple of images per class {M}; "
            f"set trainer.batch_size to {choices} or change data.images_per_class"
        )
    if batch_size // M < 2:
        raise DataError(
            f"batch size {batch_size} with {M} images per class holds only {batch_size // M} class per batch "
            f"but pair losses need at least 2; set trainer.batch_size to at least {2 * M}"
        )
    return ClassBalancedBatchSampler(labels, classes_per_batch=batch_size // M, images_per_class=M, **options)


class ShuffleBatchSampler:
    """Shuffled batches for classification losses, sharded like ``DistributedSampler``.

    Each epoch permutes all indices; rank ``r`` takes positions ``r, r + world_size, ...``.
    ``drop_last=False``: the permutation is padded with its own start so every rank gets
    ``ceil(n / world_size)`` indices, and the last batch may be short (every index is
    served at least once). ``drop_last=True``: every rank gets ``n // world_size`` indices
    and only full batches (training: no batch of one for BatchNorm).
    """

    def __init__(
        self,
        num_items: int,
        *,
        batch_size: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        _check_shard(rank, world_size)
        self.num_items, self.batch_size, self.drop_last = num_items, batch_size, drop_last
        self.seed, self.rank, self.world_size, self.epoch = seed, rank, world_size, 0
        self.per_rank = num_items // world_size if drop_last else -(-num_items // world_size)
        if len(self) == 0:
            raise DataError(
                f"{num_items} images make no full batch of {batch_size} on each of {world_size} ranks; "
                "lower trainer.batch_size or add images"
            )

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order ``__iter__`` yields (``DistributedSampler`` semantics)."""
        self.epoch = epoch

    def __len__(self) -> int:
        if self.drop_last:
            return self.per_rank // self.batch_size
        return -(-self.per_rank // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        order = _epoch_rng(self.seed, self.epoch).permutation(self.num_items)
        total = self.per_rank * self.world_size
        order = np.resize(order, total)  # pads by repeating from the start, or truncates
        mine = order[self.rank : total : self.world_size].tolist()
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            yield mine[start : start + self.batch_size]

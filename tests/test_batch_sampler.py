"""Class-balanced C x M sampler and shuffle sampler: structure, epochs, sharding, errors."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from retrieval.indexing.common.errors import DataError
from retrieval.training.data_pipeline.batch_sampler import (
    ClassBalancedBatchSampler,
    ShuffleBatchSampler,
    make_batch_sampler,
)


def class_labels(sizes: list[int]) -> list[int]:
    """Labels of a dataset whose class c has sizes[c] images, interleaved like real file lists."""
    labels = [c for c, n in enumerate(sizes) for _ in range(n)]
    return labels[::2] + labels[1::2]


def epoch(sampler, number: int | None = None) -> list[list[int]]:
    if number is not None:
        sampler.set_epoch(number)
    return [list(batch) for batch in sampler]


def test_every_batch_has_c_distinct_classes_of_m_distinct_images():
    labels = class_labels([7, 4, 12, 5, 9, 4, 6, 30])
    sampler = make_batch_sampler(12, 4, labels, seed=3, batches_per_epoch=40)
    batches = epoch(sampler)
    assert len(batches) == len(sampler) == 40
    for batch in batches:
        assert len(batch) == 12 and len(set(batch)) == 12
        counts = Counter(labels[i] for i in batch)
        assert len(counts) == 3 and set(counts.values()) == {4}
        # images of one class sit together, in C blocks of M
        assert all(len({labels[i] for i in batch[k : k + 4]}) == 1 for k in range(0, 12, 4))


def test_default_length_is_images_over_batch_size():
    labels = class_labels([10] * 10)  # 100 images
    assert len(make_batch_sampler(8, 2, labels)) == 100 // 8
    assert len(make_batch_sampler(8, 2, labels, world_size=2)) == 100 // 16
    assert len(make_batch_sampler(8, 2, labels, batches_per_epoch=3)) == 3
    assert len(list(make_batch_sampler(8, 2, labels, batches_per_epoch=3))) == 3


def test_balanced_epoch_visits_every_image_once():
    # 10 classes x 8 images, C=2, M=4: 10 batches = 2 passes over classes = 2 draws per class
    labels = class_labels([8] * 10)
    batches = epoch(make_batch_sampler(8, 4, labels, seed=5))
    assert len(batches) == 10
    assert sorted(i for b in batches for i in b) == list(range(80))


def test_passes_that_straddle_batches_still_visit_each_item_equally():
    # 5 classes of 6: 5 batches of 3 classes = 3 class passes; each class drawn 3 x 4 = 12 = 2 passes
    labels = class_labels([6] * 5)
    for seed in range(5):
        batches = epoch(make_batch_sampler(12, 4, labels, seed=seed, batches_per_epoch=5))
        assert Counter(i for b in batches for i in b) == {i: 2 for i in range(30)}


def test_epochs_differ_and_are_reproducible():
    labels = class_labels([6] * 20)
    first = make_batch_sampler(8, 2, labels, seed=11)
    second = make_batch_sampler(8, 2, labels, seed=11)
    assert epoch(first) == epoch(second) == epoch(first)  # no set_epoch: same order again
    assert epoch(first, 1) == epoch(second, 1)
    assert epoch(first, 1) != epoch(first, 0)
    assert epoch(first, 0) == epoch(second, 0)
    assert epoch(make_batch_sampler(8, 2, labels, seed=12)) != epoch(second, 0)


def test_rank_shards_are_disjoint_slices_of_one_global_batch():
    labels = class_labels([5, 9, 6, 4, 8, 7, 10, 4, 6, 5, 12, 4])
    world, C, M = 3, 2, 4
    ranks = [make_batch_sampler(C * M, M, labels, seed=2, rank=r, world_size=world) for r in range(world)]
    single = make_batch_sampler(C * M * world, M, labels, seed=2)  # C * world classes per batch
    for e in (0, 1):
        per_rank = [epoch(s, e) for s in ranks]
        global_batches = epoch(single, e)
        assert all(len(b) == len(global_batches) == len(ranks[0]) for b in per_rank)
        for step, global_batch in enumerate(global_batches):
            shards = [per_rank[r][step] for r in range(world)]
            assert sum(shards, []) == global_batch
            shard_classes = [{labels[i] for i in shard} for shard in shards]
            assert all(len(c) == C for c in shard_classes)
            assert len(set().union(*shard_classes)) == C * world  # no class on two ranks


def test_batch_size_not_multiple_of_m_is_refused():
    with pytest.raises(DataError, match=r"^batch size 30 is not a multiple of images per class 4; .*28 or 32"):
        make_batch_sampler(30, 4, class_labels([8] * 10))


def test_batch_with_one_class_is_refused():
    with pytest.raises(DataError, match=r"batch size 4 with 4 images per class holds only 1 class .* at least 8"):
        make_batch_sampler(4, 4, class_labels([8] * 10))


def test_too_few_classes_with_m_images_is_refused():
    labels = class_labels([4, 5, 9, 3, 2])  # 3 classes qualify for M=4
    with pytest.raises(
        DataError,
        match=r"^only 3 classes have at least 4 images but a batch needs 4 classes;.*data.small_classes to pad",
    ):
        make_batch_sampler(16, 4, labels)
    with pytest.raises(DataError, match=r"needs 4 classes \(2 per rank x 2 ranks\)"):
        make_batch_sampler(8, 4, labels, world_size=2)
    make_batch_sampler(16, 4, labels, small_classes="pad")  # all 5 classes take part
    with pytest.raises(DataError, match=r"^the data has only 5 classes but a batch needs 6 classes;"):
        make_batch_sampler(24, 4, labels, small_classes="pad")


NAMES = {0: "ant", 1: "bee", 2: "cat", 3: "dog", 4: "eel", 5: "fox"}


def test_classes_smaller_than_m_are_dropped_and_the_run_log_says_so(caplog):
    labels = class_labels([8, 3, 8, 1, 8, 8])
    with caplog.at_level(logging.INFO, logger="retrieval.training.data_pipeline.batch_sampler"):
        sampler = make_batch_sampler(8, 4, labels, class_names=NAMES, batches_per_epoch=20)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "dropped 2 classes with fewer than 4 images ('bee', 'dog'); their 4 images" in caplog.text
    used = {labels[i] for batch in sampler for i in batch}
    assert used == {0, 2, 4, 5}
    assert len(sampler) == 20


def test_small_classes_can_be_padded_by_sampling_with_replacement(caplog):
    labels = class_labels([8, 3, 8, 1, 8, 8])
    with caplog.at_level(logging.INFO, logger="retrieval.training.data_pipeline.batch_sampler"):
        sampler = make_batch_sampler(8, 4, labels, class_names=NAMES, batches_per_epoch=30, small_classes="pad")
    assert "padded 2 classes with fewer than 4 images ('bee', 'dog') by sampling their 4 images" in caplog.text
    members = {c: {i for i, y in enumerate(labels) if y == c} for c in range(6)}
    batches = epoch(sampler)
    assert {labels[i] for b in batches for i in b} == set(range(6))  # the small classes take part
    for batch in batches:
        assert len(batch) == 8
        for k in range(0, 8, 4):  # C blocks of M images of one class
            block = batch[k : k + 4]
            (label,) = {labels[i] for i in block}
            small = len(members[label]) < 4
            # a small class gives every one of its images, padded with repeats; the others never repeat
            assert set(block) == members[label] if small else len(set(block)) == 4


def test_padded_classes_shard_like_the_global_batch():
    labels = class_labels([2, 5, 3, 6, 2, 4])
    ranks = [make_batch_sampler(8, 4, labels, seed=1, rank=r, world_size=2, small_classes="pad") for r in (0, 1)]
    single = make_batch_sampler(16, 4, labels, seed=1, small_classes="pad")
    for step, global_batch in enumerate(epoch(single, 3)):
        assert epoch(ranks[0], 3)[step] + epoch(ranks[1], 3)[step] == global_batch


def test_unknown_small_classes_policy_is_refused():
    with pytest.raises(ValueError, match="small_classes must be 'drop' or 'pad', got 'keep'"):
        make_batch_sampler(8, 2, class_labels([4] * 6), small_classes="keep")


def test_bad_rank_is_refused():
    with pytest.raises(ValueError, match="rank 2 is outside 0..1"):
        ClassBalancedBatchSampler([0, 0, 1, 1], classes_per_batch=1, images_per_class=2, rank=2, world_size=2)


def test_shuffle_sampler_covers_each_index_once_per_epoch():
    sampler = ShuffleBatchSampler(23, batch_size=5, seed=4)
    batches = epoch(sampler)
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3] and len(sampler) == 5
    assert sorted(sum(batches, [])) == list(range(23))
    assert epoch(sampler, 1) != epoch(sampler, 0)
    assert epoch(sampler, 1) == epoch(ShuffleBatchSampler(23, batch_size=5, seed=4), 1)


def test_shuffle_sampler_shards_like_distributed_sampler():
    n, world = 24, 3
    shards = [
        sum(epoch(ShuffleBatchSampler(n, batch_size=4, seed=1, rank=r, world_size=world)), []) for r in range(world)
    ]
    assert all(len(s) == 8 for s in shards)
    assert sorted(sum(shards, [])) == list(range(n))  # disjoint and complete
    # n not divisible by world: padded from the start, every index served at least once
    padded = [sum(epoch(ShuffleBatchSampler(10, batch_size=2, seed=1, rank=r, world_size=4)), []) for r in range(4)]
    assert all(len(s) == 3 for s in padded)
    assert set(sum(padded, [])) == set(range(10)) and len(sum(padded, [])) == 12


def test_shuffle_sampler_drop_last_yields_only_full_batches():
    sampler = ShuffleBatchSampler(23, batch_size=5, seed=0, rank=1, world_size=2, drop_last=True)
    batches = epoch(sampler)
    assert len(batches) == len(sampler) == 11 // 5
    assert all(len(b) == 5 for b in batches) and len(set(sum(batches, []))) == 10
    with pytest.raises(DataError, match=r"^10 images make no full batch of 32 on each of 1 ranks;"):
        ShuffleBatchSampler(10, batch_size=32, drop_last=True)

"""Train/eval DataLoaders: batch structure, epochs, worker seeding, with 0 and 2 workers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.records import ImageRecord
from retrieval.training.config.train_config import DataConfig, TrainConfig, TrainerConfig
from retrieval.training.data_pipeline.data_loaders import build_eval_loader, build_train_loader, set_loader_epoch
from retrieval.training.data_pipeline.image_dataset import label_index
from retrieval.training.data_pipeline.transforms import build_eval_transform

CLASSES, PER_CLASS = 6, 4


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[ImageRecord]:
    """6 classes x 4 noise images of varying sizes."""
    root, rng, out = tmp_path_factory.mktemp("loader_images"), np.random.default_rng(0), []
    for i in range(CLASSES * PER_CLASS):
        label = f"class{i % CLASSES}"
        path = root / label / f"{i}.png"
        path.parent.mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (40 + i, 48, 3), dtype=np.uint8)).save(path)
        out.append(ImageRecord(path=Path(path), label=label))
    return out


def config(workers: int, batch_size: int = 8) -> TrainConfig:
    return TrainConfig(
        data=DataConfig(image_size=32, images_per_class=2, num_workers=workers),
        trainer=TrainerConfig(batch_size=batch_size, eval_batch_size=5, seed=7),
    )


def collect(loader) -> tuple[list[torch.Tensor], list[list[int]], list[list[int]]]:
    images, labels, indices = [], [], []
    for batch_images, batch_labels, batch_indices in loader:
        images.append(batch_images)
        labels.append(batch_labels.tolist())
        indices.append(batch_indices.tolist())
    return images, labels, indices


@pytest.mark.parametrize("workers", [0, 2])
def test_balanced_train_loader_yields_c_by_m_batches(records, workers):
    index = label_index(records)
    loader = build_train_loader(records, index, config(workers), sampler_kind="balanced")
    assert len(loader) == CLASSES * PER_CLASS // 8
    assert loader.persistent_workers == (workers > 0) and not loader.pin_memory
    images, labels, indices = collect(loader)
    assert len(images) == 3
    for batch_images, batch_labels, batch_indices in zip(images, labels, indices):
        assert batch_images.shape == (8, 3, 32, 32) and batch_images.dtype == torch.float32
        assert set(Counter(batch_labels).values()) == {2} and len(set(batch_labels)) == 4
        assert batch_labels == [index[records[i].label] for i in batch_indices]


@pytest.mark.parametrize("workers", [0, 2])
def test_shuffle_train_loader_covers_each_image_once(records, workers):
    loader = build_train_loader(records, label_index(records), config(workers), sampler_kind="shuffle")
    _, _, indices = collect(loader)
    assert [len(b) for b in indices] == [8, 8, 8]
    assert sorted(sum(indices, [])) == list(range(CLASSES * PER_CLASS))


def test_set_loader_epoch_changes_order_reproducibly(records):
    index, cfg = label_index(records), config(0)
    first = build_train_loader(records, index, cfg, sampler_kind="balanced")
    second = build_train_loader(records, index, cfg, sampler_kind="balanced")
    set_loader_epoch(first, 3)
    set_loader_epoch(second, 3)
    order3 = [list(b) for b in first.batch_sampler]
    assert order3 == [list(b) for b in second.batch_sampler]
    set_loader_epoch(first, 4)
    assert [list(b) for b in first.batch_sampler] != order3


def test_augmentations_are_reproducible_with_workers(records):
    index, cfg = label_index(records), config(2)
    runs = [collect(build_train_loader(records, index, cfg, sampler_kind="shuffle"))[0] for _ in range(2)]
    assert len(runs[0]) == 3 and all(torch.equal(a, b) for a, b in zip(*runs))


def test_ranks_get_disjoint_classes_per_step(records):
    index, cfg = label_index(records), config(0, batch_size=4)  # 2 classes x 2 images per rank
    loaders = [build_train_loader(records, index, cfg, sampler_kind="balanced", rank=r, world_size=2) for r in (0, 1)]
    assert len(loaders[0]) == len(loaders[1]) == CLASSES * PER_CLASS // 8
    for step0, step1 in zip(*(loader.batch_sampler for loader in loaders)):
        assert not {records[i].label for i in step0} & {records[i].label for i in step1}


@pytest.mark.parametrize("workers", [0, 2])
def test_eval_loader_keeps_record_order_and_uses_eval_transform(records, workers):
    cfg = config(workers)
    loader = build_eval_loader(records, label_index(records), cfg, "cpu")
    images, labels, indices = collect(loader)
    assert [len(b) for b in indices] == [5, 5, 5, 5, 4]
    assert sum(indices, []) == list(range(len(records)))
    transform = build_eval_transform(cfg.data)
    expected = torch.stack([transform(open_rgb(r.path)) for r in records])
    assert torch.equal(torch.cat(images), expected)


def test_unknown_sampler_kind_lists_the_known_ones(records):
    with pytest.raises(ValueError, match="unknown sampler kind 'auto'; known: 'balanced', 'shuffle'"):
        build_train_loader(records, label_index(records), config(0), sampler_kind="auto")


def test_data_small_classes_pads_classes_smaller_than_m(records):
    # every class has 4 images; M = 5 drops them all unless they are padded with repeats
    index = label_index(records)

    def cfg(small_classes: str) -> TrainConfig:
        data = DataConfig(image_size=32, images_per_class=5, num_workers=0, small_classes=small_classes)
        return TrainConfig(data=data, trainer=TrainerConfig(batch_size=10, seed=7))

    with pytest.raises(DataError, match="only 0 classes have at least 5 images"):
        build_train_loader(records, index, cfg("drop"), sampler_kind="balanced")
    loader = build_train_loader(records, index, cfg("pad"), sampler_kind="balanced")
    for batch in loader.batch_sampler:
        for block in (batch[:5], batch[5:]):
            (label,) = {records[i].label for i in block}
            assert set(block) == {i for i, r in enumerate(records) if r.label == label}  # all 4, one repeated

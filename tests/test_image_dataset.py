"""ImageRecordDataset: tensors, labels, and substitution of images that go bad mid-epoch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.training.config.train_config import DataConfig
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset, label_index, record_label_indices
from retrieval.training.data_pipeline.transforms import build_eval_transform

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def colour_of(i: int) -> tuple[int, int, int]:
    return (10 * i % 256, 255 - 7 * i % 256, 90)


def write_records(root: Path, labels: list[str]) -> list[ImageRecord]:
    """One uniformly coloured PNG per record; image i has colour_of(i), so pixels identify it."""
    records = []
    for i, label in enumerate(labels):
        path = root / label / f"{i:03d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (36 + i, 30), colour_of(i)).save(path)
        records.append(ImageRecord(path=path, label=label))
    return records


def source_of(tensor: torch.Tensor, count: int) -> int:
    """Which image the (uniform) tensor was made from, by its red channel."""
    red = float(tensor[0].mean()) * STD[0] + MEAN[0]
    return min(range(count), key=lambda i: abs(colour_of(i)[0] / 255 - red))


LABELS = ["cat", "dog", "cat", "emu", "cat", "dog"]  # cat: 0, 2, 4; dog: 1, 5; emu: 3


@pytest.fixture
def dataset(tmp_path) -> ImageRecordDataset:
    records = write_records(tmp_path, LABELS)
    return ImageRecordDataset(records, label_index(records), build_eval_transform(DataConfig(image_size=16)))


def test_label_index_is_sorted_and_dense(tmp_path):
    records = write_records(tmp_path, LABELS)
    assert label_index(records) == {"cat": 0, "dog": 1, "emu": 2}
    assert record_label_indices(records, {"cat": 0, "dog": 1, "emu": 2}) == [0, 1, 0, 2, 0, 1]


def test_unknown_label_is_a_data_error(tmp_path):
    records = write_records(tmp_path, LABELS)
    with pytest.raises(DataError, match=r"^1 record labels \('emu'\) are not in the label index of 2 classes"):
        ImageRecordDataset(records, {"cat": 0, "dog": 1}, build_eval_transform(DataConfig()))


def test_items_are_normalised_tensors_with_label_and_index(dataset):
    assert len(dataset) == 6
    for i in range(6):
        image, label, index = dataset[i]
        assert image.shape == (3, 16, 16) and image.dtype == torch.float32
        assert (label, index) == ({"cat": 0, "dog": 1, "emu": 2}[LABELS[i]], i)
        expected = [(colour_of(i)[c] / 255 - MEAN[c]) / STD[c] for c in range(3)]
        assert torch.allclose(image.mean(dim=(1, 2)), torch.tensor(expected), atol=1e-4)
    assert dataset.bad_paths == []


def corrupt(path: Path) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n this is no longer an image")


def test_image_corrupted_after_construction_is_replaced_by_next_of_its_class(dataset):
    corrupt(dataset.records[2].path)
    image, label, index = dataset[2]
    assert (label, index) == (0, 2)
    assert source_of(image, 6) == 4  # next cat after 2
    assert dataset.bad_paths == [dataset.records[2].path]
    assert torch.equal(dataset[2][0], image)  # deterministic
    assert source_of(dataset[0][0], 6) == 0  # healthy images unaffected


def test_substitution_wraps_around_and_skips_known_bad_images(dataset):
    corrupt(dataset.records[4].path)
    assert source_of(dataset[4][0], 6) == 0  # last cat wraps to the first
    dataset.records[0].path.unlink()
    assert source_of(dataset[4][0], 6) == 2
    assert source_of(dataset[0][0], 6) == 2
    assert dataset.bad_paths == [dataset.records[0].path, dataset.records[4].path]


def test_class_with_no_readable_image_left_is_a_data_error(dataset):
    corrupt(dataset.records[1].path)
    corrupt(dataset.records[5].path)
    with pytest.raises(DataError, match=r"^all 2 images of class 'dog' are unreadable now"):
        dataset[5]
    assert source_of(dataset[3][0], 6) == 3


def test_bad_paths_found_in_worker_processes_reach_the_main_process(dataset):
    corrupt(dataset.records[1].path)
    loader = DataLoader(dataset, batch_size=2, num_workers=2)
    indices, labels, sources = [], [], []
    for images, batch_labels, batch_indices in loader:
        indices += batch_indices.tolist()
        labels += batch_labels.tolist()
        sources += [source_of(image, 6) for image in images]
    assert indices == list(range(6)) and labels == [0, 1, 0, 2, 0, 1]
    assert sources == [0, 5, 2, 3, 4, 5]
    assert dataset.bad_paths == [dataset.records[1].path]

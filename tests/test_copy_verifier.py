"""The pixel check of candidate copy pairs: a hand-computed correlation, planted copies kept and distinct
look-alikes of one class dropped at the threshold measured on other images, unreadable images left to the
embedding; and ``data duplicates`` / ``index duplicates`` running it with the model's measured threshold."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pytest
from duplicates_fixtures import look_alike_dataset, look_alike_photo
from PIL import Image
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing import usecases as api
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.duplicates import copy_verifier
from retrieval.indexing.duplicates.copy_join import CopyPairs
from retrieval.indexing.duplicates.copy_signature import (
    CROPS,
    SIZE,
    copy_signature,
    path_signature,
    signature_similarity,
)
from retrieval.indexing.duplicates.copy_threshold_measure import measure_copy_threshold
from retrieval.indexing.duplicates.copy_verifier import verify_copies
from retrieval.indexing.duplicates.index_duplicates import item_duplicates, store_duplicate_groups
from retrieval.indexing.exported_model.model_manifest import ModelManifest, manifest_json
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.backends import open_store


def hand_similarity(a: Image.Image, b: Image.Image) -> float:
    """The best correlation of two images' centred grayscale thumbnails over every pair of framings."""

    def thumb(image: Image.Image, cut: float) -> np.ndarray:
        w, h = image.size
        box = (w * cut, h * cut, w * (1 - cut), h * (1 - cut))
        pixels = np.asarray(image.convert("L").resize((SIZE, SIZE), Image.Resampling.BOX, box=box), np.float64)
        pixels = pixels.ravel() - pixels.mean()
        return pixels / np.linalg.norm(pixels)

    return max(float(thumb(a, i) @ thumb(b, j)) for i in CROPS for j in CROPS)


def test_similarity_is_the_hand_computed_best_correlation() -> None:
    a, b = look_alike_photo(0, 0), look_alike_photo(0, 1)
    assert signature_similarity(copy_signature(a), copy_signature(b)) == pytest.approx(hand_similarity(a, b), abs=1e-5)
    assert signature_similarity(copy_signature(a), copy_signature(a)) == pytest.approx(1.0, abs=1e-5)
    darker = Image.fromarray((np.asarray(a, np.float32) * 0.8 + 10).astype(np.uint8))  # brightness and contrast
    assert signature_similarity(copy_signature(a), copy_signature(darker)) > 0.999


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple[Path, dict[str, str], Path]:
    """Look-alike photos with planted copies of each kind, and a model whose model.json holds the pixel
    threshold measured (as at export) on other look-alike photos."""
    root = tmp_path_factory.mktemp("look_alikes")
    plants = look_alike_dataset(root / "data", classes=3, per_class=4, copied=1, seed=5)
    look_alike_dataset(root / "calibration", classes=2, per_class=3, copied=0)
    calibration = [r for r in load_records(root / "calibration")]
    for record in calibration:  # other images than the test's: another class layout
        Image.open(record.path).transpose(Image.Transpose.ROTATE_180).save(record.path)
    model = Path(shutil.copytree(tiny_model_dir, root / "model"))
    measured = measure_copy_threshold(OnnxEmbedder(model), calibration)
    manifest = ModelManifest.load(model).model_copy(update={"duplicates": measured})
    (model / "model.json").write_text(manifest_json(manifest))
    return root / "data", plants, model


def copy_pairs(plants: dict[str, str]) -> set[tuple[str, str]]:
    """Every pair of one original's images: copy and original, and two copies of one original."""
    members: dict[str, set[str]] = {}
    for copy, original in plants.items():
        members.setdefault(original, {original}).add(copy)
    return {tuple(sorted(pair)) for group in members.values() for pair in itertools.combinations(group, 2)}  # type: ignore[misc]


def test_verifier_keeps_every_planted_copy_and_drops_the_look_alikes(
    planted: tuple[Path, dict[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(copy_verifier, "PAIR_CHUNK", 7)  # several rounds, each holding its own images only
    data, plants, model = planted
    threshold = ModelManifest.load(model).duplicates.pixel_threshold.threshold  # type: ignore[union-attr]
    names = sorted(p.relative_to(data).as_posix() for p in data.glob("*/*.png"))
    first, second = np.triu_indices(len(names), k=1)
    candidates = CopyPairs(first, second, np.ones(len(first), np.float32))  # every pair, as a threshold of -1
    verified = verify_copies(candidates, [data / name for name in names], threshold)
    kept = {(names[a], names[b]) for a, b in zip(verified.pairs.first, verified.pairs.second)}
    assert kept == copy_pairs(plants)
    assert (verified.checked, verified.unverified) == (len(first), 0)
    images = {name: Image.open(data / name) for name in names}
    for a, b in zip(first.tolist(), second.tolist()):  # the brute-force reference: the hand correlation
        assert ((names[a], names[b]) in kept) == (hand_similarity(images[names[a]], images[names[b]]) >= threshold)


def test_an_unreadable_or_missing_image_leaves_the_pair_to_the_embedding(tmp_path: Path) -> None:
    look_alike_photo(0, 0).save(tmp_path / "a.png")
    (tmp_path / "broken.jpg").write_bytes(b"not an image")
    candidates = CopyPairs(np.array([0, 0]), np.array([1, 2]), np.array([0.9, 0.8], np.float32))
    verified = verify_copies(candidates, [tmp_path / "a.png", tmp_path / "broken.jpg", None], 0.9)
    assert verified.pairs.second.tolist() == [1, 2] and verified.unverified == 2
    assert path_signature(tmp_path / "broken.jpg") is None
    assert "2 pairs unchecked" in verified.summary()


def test_data_duplicates_keeps_only_the_copies_among_look_alikes(planted: tuple[Path, dict[str, str], Path]) -> None:
    data, plants, model = planted
    found = api.find_dataset_duplicates(model, data, threshold=-1.0, k=40, progress=False)
    near = {
        tuple(sorted(p.relative_to(data).as_posix() for p in (found.records[c.a].path, found.records[c.b].path)))
        for c in found.pairs
    }
    assert near == copy_pairs(plants)
    assert "dropped as look-alikes" in found.summary()
    unchecked = api.find_dataset_duplicates(model, data, threshold=-1.0, k=40, verify=False, progress=False)
    assert len(unchecked.pairs) > len(found.pairs) and "pixel check off" in unchecked.thresholds.source


def test_index_groups_and_an_items_copies_are_checked_alike(
    planted: tuple[Path, dict[str, str], Path], tmp_path: Path
) -> None:
    data, plants, model = planted
    api.build_index(model, data, tmp_path / "index", progress=False)
    with open_store(tmp_path / "index") as store:
        name = {item.id: Path(item.path).relative_to(data).as_posix() for item in store.all_items()}
        groups = store_duplicate_groups(store, -1.0, k=40).groups
        want = {original: {original} | {c for c, o in plants.items() if o == original} for original in plants.values()}
        assert sorted(sorted(name[i] for i in group) for group in groups) == sorted(sorted(g) for g in want.values())
        original = next(iter(want))
        copies = item_duplicates(store, next(i for i, n in name.items() if n == original), -1.0)
        assert {name[hit.item.id] for hit in copies.hits} == want[original] - {original}
    args = ["index", "duplicates", str(tmp_path / "index"), "--out", str(tmp_path / "g.csv"), "--quiet"]
    checked = CliRunner().invoke(app, args)
    assert checked.exit_code == 0 and "pixel check" in checked.output and "dropped as look-alikes" in checked.output
    unchecked = CliRunner().invoke(app, [*args, "--no-pixel-check"])
    assert unchecked.exit_code == 0 and "(pixel check off)" in unchecked.output

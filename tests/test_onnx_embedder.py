"""OnnxEmbedder: output matches the torch model, is normalised, survives odd and broken images."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from index_fixtures import TINY_DIM, make_image
from PIL import Image

from retrieval.indexing.common.errors import ConfigError, IndexFormatError
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.exported_model.preprocess import preprocess_batch
from retrieval.indexing.exported_model.resolution import resolve_export_dir


@pytest.fixture(scope="module")
def embedder(tiny_model_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder(tiny_model_dir, threads=1, providers="cpu")


def test_embeddings_are_unit_length_and_match_onnx_reference(embedder: OnnxEmbedder) -> None:
    import onnx
    import onnx.reference

    images = [make_image(c, 0) for c in range(4)]
    out = embedder.embed_images(images)
    assert out.shape == (4, TINY_DIM) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    model = onnx.load(str(embedder.export_dir / "model.onnx"))
    batch = preprocess_batch(images, embedder.manifest.preprocessing)
    (reference,) = onnx.reference.ReferenceEvaluator(model).run(None, {"images": batch})
    np.testing.assert_allclose(out, reference, atol=1e-5)
    assert embedder.providers == ["CPUExecutionProvider"]


def _write_odd_images(folder: Path) -> list[Path]:
    """EXIF-rotated JPEG, greyscale, palette, RGBA with transparency, and a 16-bit PNG."""
    folder.mkdir(parents=True, exist_ok=True)
    base = make_image(2, 3, size=(60, 40))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    paths = {
        "exif.jpg": lambda p: base.save(p, exif=exif.tobytes()),
        "grey.png": lambda p: base.convert("L").save(p),
        "palette.gif": lambda p: base.convert("P").save(p),
        "rgba.png": lambda p: base.convert("RGBA").save(p),
        "deep.png": lambda p: Image.fromarray(np.asarray(base.convert("L"), np.uint16) * 257).save(p),
    }
    written = []
    for name, save in paths.items():
        save(folder / name)
        written.append(folder / name)
    return written


def test_odd_modes_embed_and_a_corrupt_file_is_reported(embedder: OnnxEmbedder, tmp_path: Path) -> None:
    paths = _write_odd_images(tmp_path / "odd")
    corrupt = tmp_path / "odd" / "corrupt.jpg"
    buffer = io.BytesIO()
    make_image(0, 0).save(buffer, format="JPEG")
    corrupt.write_bytes(buffer.getvalue()[:200])  # truncated JPEG
    text = tmp_path / "odd" / "notes.jpg"
    text.write_text("not an image")
    mixed = paths[:2] + [corrupt] + paths[2:] + [text, tmp_path / "missing.png"]
    result = embedder.embed_paths(mixed, batch_size=2, progress=False)
    assert result.ok == [0, 1, 3, 4, 5]
    assert [path for path, _ in result.failures] == [corrupt, text, tmp_path / "missing.png"]
    assert all(str(path) in reason for path, reason in result.failures)
    assert result.embeddings.shape == (5, TINY_DIM)
    np.testing.assert_allclose(np.linalg.norm(result.embeddings, axis=1), 1.0, atol=1e-5)
    # the batched, threaded path gives the same rows as embedding one image at a time
    from retrieval.indexing.data.image_io import open_rgb

    single = embedder.embed_images([open_rgb(paths[2])])
    np.testing.assert_allclose(result.embeddings[2], single[0], atol=1e-5)


def test_embed_paths_of_nothing_is_empty(embedder: OnnxEmbedder) -> None:
    result = embedder.embed_paths([], progress=False)
    assert result.embeddings.shape == (0, TINY_DIM) and result.ok == [] and result.failures == []


def test_sha_mismatch_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "export"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.onnx").write_bytes((broken / "model.onnx").read_bytes() + b"\0")
    with pytest.raises(IndexFormatError, match="sha256 .* but model.json expects"):
        OnnxEmbedder(broken)


@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider'")
def test_bad_model_dirs_and_options_give_one_sentence(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        OnnxEmbedder(tmp_path)
    with pytest.raises(ConfigError, match="unknown providers 'tpu'"):
        OnnxEmbedder(tiny_model_dir, providers="tpu")
    if "CUDAExecutionProvider" not in __import__("onnxruntime").get_available_providers():
        with pytest.raises(ConfigError, match="CUDA was requested"):
            OnnxEmbedder(tiny_model_dir, providers="cuda")
    (tmp_path / "model.json").write_text("{not json")
    (tmp_path / "model.onnx").write_bytes(b"x")
    with pytest.raises(IndexFormatError, match="not a valid model manifest"):
        OnnxEmbedder(tmp_path)


def test_model_resolution_accepts_export_and_run_dirs(tiny_model_dir: Path, tmp_path: Path) -> None:
    assert resolve_export_dir(tiny_model_dir) == tiny_model_dir.resolve()
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run_dir / "export")
    assert resolve_export_dir(run_dir) == (run_dir / "export").resolve()
    (tmp_path / "unexported").mkdir()
    with pytest.raises(ConfigError, match="run `retrieval export .*unexported` first"):
        resolve_export_dir(tmp_path / "unexported")
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_export_dir(tmp_path / "nowhere")

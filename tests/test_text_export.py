"""The CLIP text tower exported beside the image tower (#49), with a tiny random CLIP served by the fake hub.

tokenizer.json gives open_clip's ids; text.onnx and model.onnx match open_clip's ``encode_text`` and
``encode_image`` in torch to the fp32 tolerance; a training-free run (``--epochs 0``, ``--pretrained hub``)
exports both with model.json's ``text``; training or a whitening stage drops the text side with one sentence,
in the run summary and in model.json."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import open_clip
import pytest
import torch
from fake_hub import FakeHub, serving
from huggingface_hub import constants
from timm.layers.activations import QuickGELU
from tiny_clip import (
    BACKBONE,
    EMBEDDING_DIM,
    HUB_KEY,
    IMAGE_SIZE,
    tiny_clip_bytes,
    tiny_clip_model,
    tiny_text_export,
    use_tiny_clip,
)
from typer.testing import CliRunner

from retrieval import export, train
from retrieval.cli.main import app
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.text_side import TEXT_TOWERS
from retrieval.training.config.hub_access import text_dropped_reason
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.export.onnx_export import TOLERANCE
from retrieval.training.export.text_export import tokenized
from retrieval.training.model.text.clip_tokenizer import clip_tokenizer_json
from retrieval.training.model.trunks.backbones import outline_backbone
from retrieval.training.run.outputs.run_dir import load_run_config

TEXTS = [
    "a photo of a Red Pickup-Truck!!",
    "  Hello,   world's   end... ",
    "café naïve 東京 タワー 😀",
    "it's 2024: the 3rd-best car; $5.99?",
    "don't STOP\tme\nnow",
    "",
    "a long caption " * 40,  # 120 words: truncated, the end token kept last
]


def _run(session_path: Path, name: str, inputs: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(session_path), providers=["CPUExecutionProvider"])
    return session.run(None, {name: inputs})[0]


def test_tokenizer_json_gives_open_clips_ids() -> None:
    expected = open_clip.get_tokenizer("ViT-B-32")(TEXTS).numpy()
    ids = tokenized(clip_tokenizer_json(77), TEXTS)
    assert ids.shape == (len(TEXTS), 77)
    np.testing.assert_array_equal(ids, expected)
    assert ids[-1, -1] == 49407 and ids[-1, 0] == 49406  # truncated: start token first, end token last


def _assert_towers_match(export_dir: Path, manifest: ModelManifest, clip: torch.nn.Module) -> None:
    """model.onnx is ``encode_image`` and text.onnx ``encode_text`` of ``clip`` (normalised), to fp32's tolerance."""
    text = manifest.text
    assert text is not None
    tokenizer_json = (export_dir / text.tokenizer_file).read_text()
    assert hashlib.sha256(tokenizer_json.encode()).hexdigest() == text.tokenizer_sha256
    assert hashlib.sha256((export_dir / text.onnx_file).read_bytes()).hexdigest() == text.onnx_sha256
    ids = tokenized(tokenizer_json, TEXTS)
    np.testing.assert_array_equal(ids, open_clip.get_tokenizer("ViT-B-32")(TEXTS).numpy())
    images = torch.randn(3, 3, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected_text = clip.encode_text(torch.from_numpy(ids), normalize=True).numpy()  # all 77 positions
        expected_image = clip.encode_image(images, normalize=True).numpy()
        logit_scale = float(clip.logit_scale.exp())
    text_embeddings = _run(export_dir / text.onnx_file, text.input_name, ids)
    for row, one in enumerate(ids):  # alone, each text runs only its own tokens (the graph cuts after its end)
        alone = _run(export_dir / text.onnx_file, text.input_name, one[None])
        assert np.abs(alone - expected_text[row]).max() <= TOLERANCE["fp32"]
    image_embeddings = _run(export_dir / manifest.onnx_file, manifest.input_name, images.numpy())
    assert np.abs(text_embeddings - expected_text).max() <= TOLERANCE["fp32"]
    assert np.abs(image_embeddings - expected_image).max() <= TOLERANCE["fp32"]
    assert text.context_length == 77 and text.embedding_dim == manifest.embedding_dim == EMBEDDING_DIM
    assert text.logit_scale == pytest.approx(logit_scale, rel=1e-6)


def test_a_tiny_text_export_holds_both_towers_of_the_clip(tmp_path: Path) -> None:
    manifest = tiny_text_export(tmp_path)
    assert ModelManifest.load(tmp_path) == manifest
    _assert_towers_match(tmp_path, manifest, tiny_clip_model())


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The fake hub serving the tiny CLIP as clip_vitb16's open_clip file, and clip_vitb16 made tiny."""
    use_tiny_clip(monkeypatch)
    with serving(FakeHub({HUB_KEY: tiny_clip_bytes()})) as served:
        monkeypatch.setattr(constants, "ENDPOINT", served.url)
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", served.url + "/{repo_id}/resolve/{revision}/{filename}"
        )
        monkeypatch.delenv("RETRIEVAL_ALLOW_DOWNLOAD", raising=False)
        yield served


def _train(data: Path, out: Path, cache: Path, **options: object) -> Path:
    run = train(
        data,
        out,
        recipe="normsoftmax",
        backbone=BACKBONE,
        pretrained="hub",
        allow_download=True,
        weights_cache=str(cache),
        image_size=IMAGE_SIZE,
        batch_size=8,
        num_workers=0,
        device="cpu",
        progress=False,
        **options,
    )
    return run.run_dir


def test_a_training_free_clip_run_exports_its_text_tower(
    hub: FakeHub, synth_data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO")
    run_dir = _train(synth_data, tmp_path / "run", tmp_path / "cache", epochs=0)
    assert "text tower is exported beside the image tower" in caplog.text  # the run summary says so first
    done = CliRunner().invoke(app, ["export", str(run_dir)])
    assert done.exit_code == 0, done.output
    assert "text tower: text.onnx + tokenizer.json (open_clip retrieval-tiny-clip openai, 77 tokens)" in done.output
    result = export(run_dir)
    assert [request[1].rsplit("/", 1)[-1] for request in hub.gets()] == ["open_clip_pytorch_model.bin"]  # both towers
    assert result.manifest.text is not None and result.manifest.text_dropped is None
    assert result.manifest.text.source == "open_clip retrieval-tiny-clip openai"
    # the run's own model (timm's trunk, the tower's projection) is open_clip's image tower
    _assert_towers_match(run_dir / "export", result.manifest, tiny_clip_model())


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"epochs": 1, "max_steps_per_epoch": 1}, "training changes the image space"),
        ({"epochs": 0, "whitening__method": "pca", "whitening__dim": 16, "whitening__shrinkage": 0.1}, "whitening"),
    ],
)
def test_training_or_whitening_drops_the_text_side_with_one_sentence(
    hub: FakeHub,
    synth_data: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    options: dict[str, object],
    words: str,
) -> None:
    caplog.set_level("INFO")
    run_dir = _train(synth_data, tmp_path / "run", tmp_path / "cache", **options)
    done = CliRunner().invoke(app, ["export", str(run_dir)])
    assert done.exit_code == 0, done.output
    manifest = ModelManifest.load(run_dir / "export")
    reason = text_dropped_reason(load_run_config(run_dir))
    assert reason is not None and reason in done.output
    assert manifest.text is None and manifest.text_dropped == reason
    assert reason is not None and words in reason and reason.count(". ") == 0  # one sentence
    assert reason in caplog.text  # the run summary's, before training
    assert not (run_dir / "export" / "text.onnx").exists()


def test_a_clip_run_from_other_weights_says_why_it_has_no_text_side() -> None:
    config = TrainConfig.model_validate({"model": {"backbone": "clip_vitb32", "pretrained": "imagenet"}})
    assert text_dropped_reason(config) == (
        "the clip_vitb32 text tower is not exported: it comes with the hub's open_clip weights (--pretrained hub), "
        "not with imagenet"
    )
    assert text_dropped_reason(TrainConfig.model_validate({"model": {"backbone": "dinov2_vits14"}})) is None


def test_the_clip_trunks_use_quickgelu_as_openais_weights_were_trained() -> None:
    """timm publishes OpenAI's CLIP weights under its GELU model; built so, the trunk is not open_clip's tower."""
    for name in ("clip_vitb16", "clip_vitb32"):
        assert name in TEXT_TOWERS
        trunk, _ = outline_backbone(name)
        assert all(isinstance(block.mlp.act, QuickGELU) for block in trunk.blocks), name

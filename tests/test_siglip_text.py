"""SigLIP's text tower exported beside its image tower (#49), with a tiny random SigLIP served by the fake hub.

A training-free ``siglip_vitb16`` run (``--epochs 0``, ``--pretrained hub``) embeds images as open_clip's
``encode_image`` (its attention-pool head over the trunk's tokens, no projection), and its export writes
text.onnx (``encode_text``, within fp32's tolerance) and the hub's tokenizer.json set to clean, pad and truncate
as open_clip's SigLIP tokenizer does; text search over HTTP then scores open_clip's own cosines."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import timm
import torch
from fake_hub import FakeHub, serving
from huggingface_hub import constants
from index_fixtures import make_gallery
from open_clip.tokenizer import canonicalize_text
from serving_fixtures import serving_client
from tiny_siglip import (
    BACKBONE,
    CONTEXT_LENGTH,
    IMAGE_SIZE,
    TINY_TIMM_NAME,
    WIDTH,
    hub_files,
    hub_tokenizer,
    hub_tokenizer_json,
    tiny_siglip_model,
    use_tiny_siglip,
)
from typer.testing import CliRunner

from retrieval import train
from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.build.builder import build_index
from retrieval.training.config.hub_access import HubAccess, consent_needed
from retrieval.training.export.onnx_export import TOLERANCE
from retrieval.training.export.text_export import tokenized
from retrieval.training.model.embedding_model import EmbeddingModel, build_pooling
from retrieval.training.model.hub_weights import hub_side_file
from retrieval.training.model.text.siglip_tokenizer import HUB_TOKENIZER, siglip_tokenizer

TEXTS = [
    "a photo of the Red Pickup-Truck!!",
    "  Two_small   birds,  on a branch... ",
    "café naïve 東京 😀",
    "it's 2024: the 3rd-best dog; $5.99?",
    "don't STOP\tme\nnow",
    "",
    "a photo of the sea " * 30,  # 150 pieces: truncated, the end token kept last
]
PAD_ID = END_ID = 1  # "</s>"


def _run(path: Path, name: str, inputs: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {name: inputs})[0]


def test_the_tokenizer_cleans_pads_and_truncates_as_open_clips_siglip_tokenizer() -> None:
    """open_clip's SigLIP tokenizer: ``canonicalize_text``, then the hub tokenizer, padded with ``</s>`` to 64 and
    truncated with ``</s>`` kept last (transformers' ``padding="max_length", truncation=True``)."""
    raw = hub_tokenizer()
    ids = tokenized(siglip_tokenizer(hub_tokenizer_json(), CONTEXT_LENGTH).to_str(), TEXTS)
    assert ids.shape == (len(TEXTS), CONTEXT_LENGTH)
    for text, row in zip(TEXTS, ids, strict=True):
        expected = raw.encode(canonicalize_text(text)).ids
        expected = [*expected[: CONTEXT_LENGTH - 1], END_ID] if len(expected) > CONTEXT_LENGTH else expected
        assert row.tolist() == expected + [PAD_ID] * (CONTEXT_LENGTH - len(expected)), text
    assert ids[-1, -1] == END_ID and (ids[-1] != PAD_ID).sum() == CONTEXT_LENGTH - 1  # truncated: full, end last
    assert ids[5].tolist() == [END_ID] * CONTEXT_LENGTH  # the empty text: its end token, then padding
    assert tokenized(siglip_tokenizer(hub_tokenizer_json(), 8).to_str(), ["Hello, WORLD"]).shape == (1, 8)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The fake hub serving the tiny SigLIP as siglip_vitb16's open_clip file and tokenizer; siglip_vitb16 tiny."""
    use_tiny_siglip(monkeypatch)
    with serving(FakeHub(hub_files())) as served:
        monkeypatch.setattr(constants, "ENDPOINT", served.url)
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", served.url + "/{repo_id}/resolve/{revision}/{filename}"
        )
        monkeypatch.delenv("RETRIEVAL_ALLOW_DOWNLOAD", raising=False)
        yield served


def _train(data: Path, root: Path, **options: object) -> tuple[Path, str]:
    """A tiny siglip_vitb16 run from the fake hub's weights, exported by the CLI: its run folder and the output."""
    run = train(
        data,
        root / "run",
        recipe="normsoftmax",
        backbone=BACKBONE,
        pretrained="hub",
        allow_download=True,
        weights_cache=str(root / "cache"),
        image_size=IMAGE_SIZE,
        batch_size=8,
        num_workers=0,
        device="cpu",
        progress=False,
        **options,
    )
    done = CliRunner().invoke(app, ["export", str(run.run_dir)])
    assert done.exit_code == 0, done.output
    return run.run_dir, done.output


def _export(data: Path, root: Path) -> Path:
    run_dir, output = _train(data, root, epochs=0)
    assert "text tower: text.onnx + tokenizer.json (open_clip retrieval-tiny-siglip webli, 64 tokens)" in output
    return run_dir / "export"


def test_a_training_free_siglip_run_exports_both_towers_of_open_clip(
    hub: FakeHub, synth_data: Path, tmp_path: Path
) -> None:
    export_dir = _export(synth_data, tmp_path)
    manifest = ModelManifest.load(export_dir)
    text = manifest.text
    assert text is not None and manifest.text_dropped is None
    assert sorted(request[1].rsplit("/", 1)[-1] for request in hub.gets()) == [
        "open_clip_pytorch_model.bin",
        "tokenizer.json",
    ]
    tokenizer_json = (export_dir / text.tokenizer_file).read_text()
    assert hashlib.sha256(tokenizer_json.encode()).hexdigest() == text.tokenizer_sha256
    assert tokenizer_json == siglip_tokenizer(hub_tokenizer_json(), CONTEXT_LENGTH).to_str()
    siglip = tiny_siglip_model()
    ids = tokenized(tokenizer_json, TEXTS)
    images = torch.randn(3, 3, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected_text = siglip.encode_text(torch.from_numpy(ids), normalize=True).numpy()
        expected_image = siglip.encode_image(images, normalize=True).numpy()  # with its attention-pool head
    image_embeddings = _run(export_dir / manifest.onnx_file, manifest.input_name, images.numpy())
    assert np.abs(image_embeddings - expected_image).max() <= TOLERANCE["fp32"]
    assert np.abs(_run(export_dir / text.onnx_file, text.input_name, ids) - expected_text).max() <= TOLERANCE["fp32"]
    alone = _run(export_dir / text.onnx_file, text.input_name, ids[:1])
    assert np.abs(alone - expected_text[:1]).max() <= TOLERANCE["fp32"]
    assert text.context_length == CONTEXT_LENGTH and text.embedding_dim == manifest.embedding_dim == WIDTH
    assert text.logit_scale == pytest.approx(float(siglip.logit_scale.detach().exp()), rel=1e-6)
    # the search by words: HTTP scores are open_clip's cosines between the text and the indexed images
    build_index(export_dir, make_gallery(tmp_path / "gallery"), tmp_path / "index", progress=False)
    queries = ["a red pickup truck", "Two small birds, on a branch!"]
    query_ids = tokenized(tokenizer_json, queries)
    with torch.no_grad():
        expected_queries = siglip.encode_text(torch.from_numpy(query_ids), normalize=True).numpy()
    with open_store(tmp_path / "index") as store:
        item_ids = [int(item_id) for item_id in store.ids()]
        cosines = store.embeddings_of(item_ids) @ expected_queries.T
    with serving_client(tmp_path / "index") as client:
        answer = client.post("/search", json={"text": queries, "k": 5})
    assert answer.status_code == 200, answer.text
    for column, entry in enumerate(answer.json()["batch"]):
        expected = dict(zip(item_ids, cosines[:, column].tolist(), strict=True))
        ranked = sorted(expected, key=lambda item_id: -expected[item_id])[:5]
        assert [hit["id"] for hit in entry["results"]] == ranked
        assert [hit["score"] for hit in entry["results"]] == pytest.approx([expected[i] for i in ranked], abs=1e-4)


def test_the_hub_tokenizer_is_fetched_only_with_consent_and_checked(hub: FakeHub, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    with pytest.raises(ConfigError) as refused:
        hub_side_file(BACKBONE, HUB_TOKENIZER, HubAccess(allow_download=False, cache_dir=cache))
    message = str(refused.value)
    assert message.startswith("timm/ViT-B-16-SigLIP/tokenizer.json is not in the weights cache") and "\n" not in message
    assert "--allow-download" in message and hub.gets() == []
    path = hub_side_file(BACKBONE, HUB_TOKENIZER, HubAccess(allow_download=True, cache_dir=cache))
    assert path.read_text() == hub_tokenizer_json()
    assert hub_side_file(BACKBONE, HUB_TOKENIZER, HubAccess(cache_dir=cache)) == path  # cached: no consent needed
    assert len(hub.gets()) == 1
    hub.corrupt = True
    with pytest.raises(ConfigError, match="does not match its checksum"):
        hub_side_file(BACKBONE, HUB_TOKENIZER, HubAccess(allow_download=True, cache_dir=str(tmp_path / "other")))


def test_map_pooling_is_timms_attention_pool_and_learns_with_the_head() -> None:
    trunk = timm.create_model(TINY_TIMM_NAME, num_classes=0, global_pool="", img_size=IMAGE_SIZE)
    pooled_trunk = timm.create_model(TINY_TIMM_NAME, num_classes=0, global_pool="map", img_size=IMAGE_SIZE).eval()
    pooled_trunk.load_state_dict(trunk.state_dict(), strict=False)  # the same trunk, timm's own head kept
    model = EmbeddingModel(trunk, WIDTH, backbone_name=BACKBONE, pooling="map", embedding_dim=None).eval()
    model.pool.attn_pool.load_state_dict(pooled_trunk.attn_pool.state_dict())
    images = torch.randn(2, 3, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = torch.nn.functional.normalize(pooled_trunk(images), dim=1)
        assert torch.allclose(model(images), expected, atol=1e-6)
    assert {id(p) for p in model.pool.parameters()} <= {id(p) for p in model.new_parameters()}
    with pytest.raises(ConfigError, match="model.pooling 'map' needs a transformer backbone"):
        build_pooling(torch.nn.Conv2d(3, 8, 3), "map")


def test_a_trained_siglip_run_drops_the_text_side_and_keeps_its_tower_reference(
    hub: FakeHub, synth_data: Path, tmp_path: Path
) -> None:
    """Epoch 0 (the reference row) is the tower's attention-pooled embedding; a trained epoch is the run's own
    model (mean pooling, a head): its export has no text side, with the sentence saying why."""
    run_dir, _ = _train(synth_data, tmp_path, epochs=1, max_steps_per_epoch=1)
    reference = torch.load(run_dir / "checkpoints" / "reference.pt", weights_only=False)
    assert reference["model_config"]["pooling"] == "map" and reference["model_config"]["embedding_dim"] is None
    manifest = ModelManifest.load(run_dir / "export")
    assert manifest.text is None and manifest.text_dropped is not None
    assert "siglip_vitb16 text tower is not exported: training changes the image space" in manifest.text_dropped
    message = consent_needed(BACKBONE, HubAccess(False, "/cache"), "retrieval train ... --allow-download")
    assert "timm/ViT-B-16-SigLIP/open_clip_model.safetensors (about 813 MB)" in message

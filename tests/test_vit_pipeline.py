"""A DINOv2 ViT-S/14 with registers (random weights, nothing downloaded) end to end on generated data: one
training epoch, ONNX export within the fp32 tolerance, the INT8 export and its check, an index built with
the export, a search that finds the query first and an evaluation of the index; every listed transformer
(2 of its blocks) through train, export, index, the service and eval; then frozen blocks, whose
onnxruntime prefix equals torch's and which get no gradient."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from serving_fixtures import serving_client

from retrieval import build_index, evaluate, export, search, train
from retrieval.indexing.data.bad_images import MIN_IMAGE_SIDE
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.exported_model.model_manifest import Quantization
from retrieval.training.config.train_config import ModelConfig
from retrieval.training.export.onnx_export import TOLERANCE, ExportResult
from retrieval.training.model.embedding_model import build_embedding_model
from retrieval.training.model.trunks import timm_trunks
from retrieval.training.model.trunks.backbones import VITS, get_backbone
from retrieval.training.model.trunks.timm_trunks import IMAGENET_MEAN
from retrieval.training.model.trunks.trunk_stages import trunk_stages
from retrieval.training.run.inputs.frozen_prefix import FrozenPrefix

SIZE = 42  # 3 x 3 patches of 14 px


@pytest.mark.slow
def test_dinov2_trains_exports_indexes_searches_and_evaluates(tmp_path: Path) -> None:
    data = tmp_path / "data"
    generate_synthetic_dataset(data, classes=8, per_class=4, size=SIZE, seed=0, progress=False)
    run_dir, exported = _one_epoch_exported(
        data,
        tmp_path,
        "dinov2_vits14_reg",
        "mean",
        32,
        SIZE,
        mean=IMAGENET_MEAN,  # DINOv2's own (ImageNet's)
    )
    # random weights on 8 validation images: the check runs and reports, whatever the drop
    int8 = export(run_dir, tmp_path / "int8", quantize="int8", max_map_drop=100.0)
    assert int8.manifest.precision == "int8" and int8.manifest.quantization is not None
    check = int8.manifest.quantization.check
    assert check is not None and check.images == 8 and 0.0 < check.map_at_r_int8 <= 1.0
    _assert_trunk_matmuls_dynamic_head_float(int8.onnx_path, int8.manifest.quantization)
    built = build_index(exported.onnx_path.parent, data, tmp_path / "index", split="test", progress=False)
    assert built.count == 16  # the 4 test classes
    query = sorted(data.glob("*/*.png"))[-1]
    hits = search(tmp_path / "index", [query], k=3)[0]
    assert Path(hits[0].item.path) == query and hits[0].score == pytest.approx(1.0, abs=2e-3)
    metrics = evaluate(index=tmp_path / "index", progress=False).metrics["float"]
    assert 0.0 < metrics.map_at_r <= 1.0


@pytest.mark.slow
def test_a_transformer_trains_on_cached_views_of_its_frozen_blocks(tmp_path: Path) -> None:
    """``frozen_stages`` + ``cached_views`` on a ViT: the frozen blocks' token activations of K views per
    image are made once, and the epoch trains the later blocks and the head on them."""
    data = tmp_path / "data"
    generate_synthetic_dataset(data, classes=8, per_class=4, size=SIZE, seed=0, progress=False)
    run = train(
        data,
        tmp_path / "run",
        recipe="normsoftmax",
        backbone="dinov2_vits14",
        pooling="cls+mean",
        embedding_dim=16,
        image_size=SIZE,
        frozen_stages=10,
        cached_views=2,
        epochs=2,
        batch_size=8,
        num_workers=0,
        device="cpu",
        progress=False,
    )
    assert run.epochs_completed == 2
    assert (run.run_dir / "checkpoints" / "last.pt").exists()
    exported = export(run.run_dir)
    assert exported.max_abs_diff <= TOLERANCE["fp32"]


# each listed transformer at its smallest image of 2 x 2 patches, with a pooling it can do (SigLIP has no class token)
PATCH_GRID_SIZE = {14: 28, 16: 32, 32: 64}
POOLING = {"dinov2": "cls+mean", "clip": "cls", "siglip": "mean"}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(VITS))
def test_every_listed_transformer_trains_exports_indexes_serves_and_evaluates(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each listed transformer with the first 2 of its 12 identical blocks (a ViT-B's whole 340 MB graph takes
    half a minute to export on 2 cores; the whole ViT-S/14 above): its own patch size, registers, class token
    or none, normalisation and pooling, through train, export (fp32 and INT8), index, the service's /search
    and eval."""
    build = timm_trunks.build_vit_trunk

    def two_blocks(*args: object) -> tuple[torch.nn.Module, int]:
        trunk, features = build(*args)  # type: ignore[arg-type]
        trunk.blocks = trunk.blocks[:2]
        return trunk, features

    monkeypatch.setattr(timm_trunks, "build_vit_trunk", two_blocks)
    size = PATCH_GRID_SIZE[int(name.split("vit")[-1][1:3])]  # dinov2_vitb14_reg -> 14
    data = tmp_path / "data"
    # images at least MIN_IMAGE_SIDE (training leaves smaller ones out, as `data check` says), cropped to `size`
    generate_synthetic_dataset(data, classes=8, per_class=4, size=max(size, MIN_IMAGE_SIDE), seed=0, progress=False)
    pooling = POOLING[name.split("_")[0]]
    mean = get_backbone(name).normalization.mean
    run_dir, exported = _one_epoch_exported(data, tmp_path, name, pooling, 16, size, mean=mean)
    int8 = export(run_dir, tmp_path / "int8", quantize="int8", max_map_drop=100.0)  # random weights: any drop
    assert int8.manifest.precision == "int8" and int8.manifest.quantization is not None
    _assert_trunk_matmuls_dynamic_head_float(int8.onnx_path, int8.manifest.quantization)
    built = build_index(exported.onnx_path.parent, data, tmp_path / "index", split="test", progress=False)
    assert built.count == 16  # the 4 test classes
    query = sorted(data.glob("*/*.png"))[-1]
    with serving_client(tmp_path / "index") as client:
        upload = {"image": ("q.png", query.read_bytes(), "image/png")}
        response = client.post("/search", files=upload, params={"k": 3})
    assert response.status_code == 200, response.text
    top = response.json()["results"][0]
    assert top["label"] == query.parent.name and top["path"] == query.name
    assert top["score"] == pytest.approx(1.0, abs=2e-3)  # the query itself, embedded by the service
    metrics = evaluate(index=tmp_path / "index", progress=False).metrics["float"]
    assert 0.0 < metrics.map_at_r <= 1.0


def test_frozen_blocks_run_in_onnxruntime_as_in_torch_and_get_no_gradient() -> None:
    torch.manual_seed(0)
    config = ModelConfig(backbone="dinov2_vits14", embedding_dim=8, pooling="mean", frozen_stages=4)
    model = build_embedding_model(config, image_size=SIZE).train()
    embedding, *blocks = trunk_stages(model.backbone)[:4]  # the patch/position embedding and blocks 0-2
    images = torch.randn(3, 3, SIZE, SIZE)
    fast = FrozenPrefix(model, torch.device("cpu"))(images)
    with torch.no_grad():
        expected = model.prefix(images)
    assert tuple(fast.shape) == (3, 1 + 9, 384)
    torch.testing.assert_close(fast, expected, atol=1e-4, rtol=1e-4)
    model(fast, start_stage=4).sum().backward()
    frozen = [model.backbone.pos_embed, model.backbone.cls_token, *embedding.parameters()]
    frozen += [parameter for block in blocks for parameter in block.parameters()]
    assert all(not parameter.requires_grad and parameter.grad is None for parameter in frozen)
    assert all(parameter.grad is not None for parameter in model.backbone.blocks[3].parameters())
    assert np.isfinite(model.head.weight.grad.numpy()).all()


def _assert_trunk_matmuls_dynamic_head_float(onnx_path: Path, record: Quantization) -> None:
    """A transformer's INT8 model: its trunk's matrix products in 8 bits (quantized dynamically, nothing
    calibrated), the head's Linear still a float product."""
    graph = onnx.load(str(onnx_path)).graph
    integer = [node.name for node in graph.node if node.op_type == "MatMulInteger"]
    float_products = [node.name for node in graph.node if node.op_type in ("MatMul", "Gemm")]
    assert integer and all(name.startswith("/backbone/") for name in integer), [
        n for n in integer if not n.startswith("/backbone/")
    ]
    assert any(name.startswith("/head/") for name in float_products)
    assert record.format == "QOperator" and record.calibration_images == 0 and "dynamic" in record.activations


def _one_epoch_exported(
    data: Path, tmp_path: Path, backbone: str, pooling: str, embedding_dim: int, size: int, *, mean: tuple[float, ...]
) -> tuple[Path, ExportResult]:
    """One normalized-softmax epoch of ``backbone`` on the CPU, exported within the fp32 tolerance with the
    trunk's own crop and mean in its preprocessing; the run directory and the export."""
    run = train(
        data,
        tmp_path / "run",
        recipe="normsoftmax",
        backbone=backbone,
        pooling=pooling,
        embedding_dim=embedding_dim,
        image_size=size,
        epochs=1,
        batch_size=8,
        num_workers=0,
        device="cpu",
        progress=False,
    )
    assert run.epochs_completed == 1
    exported = export(run.run_dir)
    assert exported.max_abs_diff <= TOLERANCE["fp32"]
    preprocessing = exported.manifest.preprocessing
    assert preprocessing.crop == size and tuple(preprocessing.mean) == tuple(mean)
    return run.run_dir, exported

"""Vision-transformer trunks (DINOv2, CLIP, SigLIP as timm defines them), with random weights: nothing is
downloaded. Every listed ViT is made for a tiny image size, returns its tokens, runs in stages and exports
to ONNX within the export's tolerance (the ViT-Bs with their first 2 blocks only, to keep seconds); the token poolings match a hand computation; weights made at another
size load with the position embedding resampled; layer-wise learning-rate decay over the stages; clear errors for a size off the patch grid and a pooling
the trunk cannot do."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from retrieval.cli.commands.backbone_commands import backbone_row
from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.hub_access import hub_repo
from retrieval.training.config.train_config import ModelConfig, TrainConfig
from retrieval.training.export.onnx_export import TOLERANCE, onnx_export_bytes, parity_max_abs_diff
from retrieval.training.losses import build_loss
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model
from retrieval.training.model.pretrained import load_pretrained
from retrieval.training.model.token_pooling import TokenPooling
from retrieval.training.model.trunks.backbone_facts import MEASURED_CPU_IMAGES_PER_S
from retrieval.training.model.trunks.backbones import BACKBONES, VITS, get_backbone, weights_origin
from retrieval.training.model.trunks.timm_trunks import timm_native_size, timm_normalization
from retrieval.training.model.trunks.trunk_stages import trunk_stages
from retrieval.training.run.fitting.optim import parameter_groups

# the smallest sizes of two patches or more a side (MIN_IMAGE_SIZE is 32), and the pooling each is tested with
# (a random DINOv2's class token barely depends on the image: its blocks start scaled by 1e-5)
SIZES = {"14": 42, "16": 32, "32": 64}
POOLING = {"dinov2": "cls+mean", "clip": "cls", "siglip": "mean"}
PREFIX_TOKENS = {"dinov2_vits14_reg": 5, "dinov2_vitb14_reg": 5, "siglip_vitb16": 0}


def _patch(name: str) -> int:
    return int(name.split("vit")[-1][1:3])  # dinov2_vits14_reg -> 14, clip_vitb32 -> 32


def _size(name: str) -> int:
    return SIZES[str(_patch(name))]


def _model(name: str, **options: object) -> EmbeddingModel:
    torch.manual_seed(0)
    config = ModelConfig.model_validate({"backbone": name, "embedding_dim": 16, **options})
    return build_embedding_model(config, image_size=_size(name)).eval()


def test_listed_vits_take_timms_normalisation_size_and_weights_repository() -> None:
    for name, (timm_name, normalization, native_size) in VITS.items():
        assert timm_normalization(timm_name) == normalization == get_backbone(name).normalization
        assert timm_native_size(timm_name) == native_size
        repo = hub_repo(name)  # timm's, or for SigLIP open_clip's (both towers; timm's holds the image tower alone)
        assert repo == ("timm/ViT-B-16-SigLIP" if name == "siglip_vitb16" else f"timm/{timm_name}")
        assert weights_origin(name) == f"Hugging Face hub {repo} (--pretrained hub --allow-download)"


@pytest.mark.parametrize("name", list(VITS))
def test_listed_vit_returns_tokens_runs_in_stages_and_exports_with_parity(name: str) -> None:
    size = _size(name)
    model = _model(name, pooling=POOLING[name.split("_")[0]])
    images = torch.randn(3, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        tokens = model.backbone(images)
        staged = images
        for stage in trunk_stages(model.backbone):
            staged = stage(staged)
    patch = _patch(name)
    width = 384 if "vits" in name else 768
    assert tokens.shape == (3, PREFIX_TOKENS.get(name, 1) + (size // patch) ** 2, width)
    torch.testing.assert_close(staged, tokens, rtol=0, atol=0)  # the stages are the trunk
    assert len(trunk_stages(model.backbone)) == 14  # embedding, 12 blocks, final norm
    if "vitb" in name:  # a ViT-B's 340 MB graph takes half a minute on 2 cores: export 2 of its 12 identical blocks
        model.backbone.blocks = model.backbone.blocks[:2]
    graph = onnx_export_bytes(model, size)
    assert parity_max_abs_diff(model, graph, size) <= TOLERANCE["fp32"]


def test_token_poolings_by_hand() -> None:
    tokens = torch.tensor([[[1.0, 2.0], [9.0, 9.0], [0.0, 4.0], [2.0, -2.0]]])  # class, register, 2 patches
    pooled = {
        mode: TokenPooling(mode, prefix_tokens=2, class_token=True)(tokens).tolist()
        for mode in ("cls", "mean", "avg", "max", "avgmax", "cls+mean")
    }
    assert pooled["cls"] == [[1.0, 2.0]]
    assert pooled["mean"] == pooled["avg"] == [[1.0, 1.0]]
    assert pooled["max"] == [[2.0, 4.0]]
    assert pooled["avgmax"] == [[3.0, 5.0]]
    assert pooled["cls+mean"] == [[1.0, 2.0, 1.0, 1.0]]
    assert TokenPooling("cls+mean", prefix_tokens=1, class_token=True).output_dim(384) == 768


def test_cls_mean_feeds_a_head_twice_as_wide() -> None:
    model = _model("dinov2_vits14", pooling="cls+mean", layer_norm=True)
    assert model.feature_dim == 768 and model.head.in_features == 768


def test_weights_made_at_another_size_load_with_the_position_embedding_resampled(tmp_path: Path) -> None:
    """A checkpoint at 56 px (4x4 patches) loads into a 42 px model (3x3): every tensor, pos_embed resampled."""
    torch.manual_seed(3)
    source = build_embedding_model(ModelConfig(backbone="dinov2_vits14"), image_size=56)
    torch.save(source.backbone.state_dict(), tmp_path / "dinov2_56.pth")
    model = _model("dinov2_vits14")
    report = load_pretrained(model, str(tmp_path / "dinov2_56.pth"))
    assert report.loaded == len(model.backbone.state_dict()) and report.missing == 0
    assert model.backbone.pos_embed.shape == (1, 1 + 9, 384)
    torch.testing.assert_close(model.backbone.blocks[5].mlp.fc1.weight, source.backbone.blocks[5].mlp.fc1.weight)
    torch.testing.assert_close(model.backbone.pos_embed[:, 0], source.backbone.pos_embed[:, 0])  # class position


def test_image_size_off_the_patch_grid_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match=r"^data.image_size 48 is not a multiple of .* patch size 14; use 42 or 56$"):
        build_embedding_model(ModelConfig(backbone="dinov2_vits14"), image_size=48)


def test_poolings_the_trunk_cannot_do_are_one_sentence() -> None:
    with pytest.raises(ConfigError, match="needs a class token, which this backbone has not; use mean"):
        _model("siglip_vitb16", pooling="cls")
    with pytest.raises(ConfigError, match="needs a transformer backbone"):
        build_embedding_model(ModelConfig(backbone="resnet18", pooling="cls+mean"))


def test_mean_is_average_pooling_on_a_feature_map() -> None:
    torch.manual_seed(0)
    avg = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=8, pooling="avg")).eval()
    torch.manual_seed(0)
    mean = build_embedding_model(ModelConfig(backbone="resnet18", embedding_dim=8, pooling="mean")).eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(avg(images), mean(images))


def test_layer_decay_gives_each_earlier_stage_a_smaller_learning_rate() -> None:
    model = _model("dinov2_vits14")
    cfg = TrainConfig.model_validate({"optimizer": {"lr": 1e-3, "layer_decay": 0.5, "head_lr": 1e-2}})
    loss = build_loss("normalized_softmax", num_classes=4, embedding_dim=16, params={}, miner=None, miner_params={})
    groups = {group["name"]: group for group in parameter_groups(model, loss, cfg)}
    assert groups["backbone"]["lr"] == 1e-3 and groups["head"]["lr"] == 1e-2  # the final norm, then the head
    assert [groups[f"backbone_stage{stage}"]["lr"] for stage in (12, 11, 0)] == [5e-4, 2.5e-4, 1e-3 * 0.5**13]
    assert any(parameter is model.backbone.pos_embed for parameter in groups["backbone_stage0"]["params"])
    in_groups = [id(p) for name, group in groups.items() if name.startswith("backbone") for p in group["params"]]
    assert sorted(in_groups) == sorted(id(p) for p in model.backbone.parameters())  # each exactly once


def test_the_listing_shows_a_vits_parameters_size_stages_speed_and_weights_repository() -> None:
    row = backbone_row("dinov2_vits14_reg")
    assert row["parameters"] == 22_057_344 and row["native_size"] == 518
    assert row["stages"] == 14 and row["features"] == 384
    assert row["cpu_images_per_s"] == {"fp32": 17.3, "int8": 31.4}
    assert row["weights_from"] == (
        "Hugging Face hub timm/vit_small_patch14_reg4_dinov2.lvd142m (--pretrained hub --allow-download)"
    )
    assert backbone_row("resnet18")["cpu_images_per_s"] is None  # not measured


def test_the_listed_speeds_are_the_ones_docs_results_records() -> None:
    """Every listed transformer (and Lite0) has the fp32 / INT8 images/s of docs/results.md's cost table."""
    table = (Path(__file__).parents[1] / "docs" / "results.md").read_text().split("what they cost on this CPU")[1]
    recorded = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 9 and cells[0].split(" ")[0] in BACKBONES.names():
            recorded[cells[0].split(" ")[0]] = (float(cells[2]), float(cells[3]))
    assert recorded == MEASURED_CPU_IMAGES_PER_S and set(VITS) <= set(recorded)

"""The names ``retrieval train`` and ``study`` accept for losses, recipes and backbones, as tables read before
torch loads, so a misspelt name fails in a second with a did-you-mean rather than after importing torch.

The registries (``training.losses.LOSSES``, ``training.model.backbones.BACKBONES``, ``recipes.recipe_registry``)
stay the one place that maps a name to code; these tables only name their entries, and
``tests/test_cli_startup.py`` holds each table equal to its registry.
"""

from __future__ import annotations

from retrieval.indexing.common.registry import unknown_name
from retrieval.training.config.recipe_tables import ALIASES, PAPER_RECIPES

LOSS_NAMES = (
    "angular",
    "arcface",
    "contrastive",
    "cosface",
    "facility_location",
    "fastap",
    "group_loss",
    "lifted_structure",
    "margin",
    "multi_similarity",
    "normalized_softmax",
    "npairs",
    "ntxent",
    "prototypical",
    "proxy_anchor",
    "proxy_nca",
    "proxy_triplet",
    "ranked_list",
    "snr",
    "soft_triple",
    "triplet",
)
BACKBONE_NAMES = (
    "clip_vitb16",
    "clip_vitb32",
    "densenet121",
    "densenet169",
    "dinov2_vitb14",
    "dinov2_vitb14_reg",
    "dinov2_vits14",
    "dinov2_vits14_reg",
    "efficientnet_b0",
    "efficientnet_lite0",
    "efficientnet_lite1",
    "efficientnet_lite2",
    "mobilenet_v3_large",
    "mobilenet_v3_small",
    "resnet101",
    "resnet18",
    "resnet34",
    "resnet50",
    "siglip_vitb16",
)
TIMM_PREFIX = "timm:"  # any timm model, checked when timm builds it
VIT_TIMM_NAMES = {  # the vision transformers of BACKBONE_NAMES -> timm's model with its pretrained tag
    "dinov2_vits14": "vit_small_patch14_dinov2.lvd142m",
    "dinov2_vitb14": "vit_base_patch14_dinov2.lvd142m",
    "dinov2_vits14_reg": "vit_small_patch14_reg4_dinov2.lvd142m",
    "dinov2_vitb14_reg": "vit_base_patch14_reg4_dinov2.lvd142m",
    "clip_vitb16": "vit_base_patch16_clip_224.openai",
    "clip_vitb32": "vit_base_patch32_clip_224.openai",
    "siglip_vitb16": "vit_base_patch16_siglip_224.webli",
}
# the backbones whose hub weights are a whole CLIP model (image and text towers): ``text_side.TEXT_TOWERS``, the
# one list (open_clip's model name and pretrained tag of each); their hub file is open_clip's
# (``hub_access.OPEN_CLIP_FILES``), read by timm for the image tower and by open_clip for the text tower
# where open_clip's file of a TEXT_TOWERS backbone is, when not in timm's repository of its image tower (timm's
# SigLIP repository holds the image tower alone; open_clip's pretrained tag names this one)
OPEN_CLIP_REPOS = {"siglip_vitb16": "timm/ViT-B-16-SigLIP"}
# how a TEXT_TOWERS image tower pools its tokens into its embedding: SigLIP's attention-pool head ("map"), CLIP's
# class token times its projection otherwise ("cls")
TOWER_POOLING = {"siglip_vitb16": "map"}


def timm_name_of(backbone: str) -> str | None:
    """The timm model (with its tag, where given) behind a listed vision transformer or ``timm:NAME``, or None."""
    if backbone.startswith(TIMM_PREFIX):
        return backbone[len(TIMM_PREFIX) :]
    return VIT_TIMM_NAMES.get(backbone)


def recipe_names() -> list[str]:
    """Every ``--recipe``: a loss, an alias or a paper's own setup."""
    return sorted({*LOSS_NAMES, *ALIASES, *PAPER_RECIPES})


def check_names(*, recipe: str | None, loss: str, backbone: str) -> None:
    """ConfigError, with the close names, for an unknown recipe, loss or backbone."""
    if recipe is not None and recipe not in recipe_names():
        raise unknown_name("recipe", "recipes", recipe, recipe_names())
    if loss not in LOSS_NAMES:
        raise unknown_name("loss", "losses", loss, list(LOSS_NAMES))
    if not backbone.startswith(TIMM_PREFIX) and backbone not in BACKBONE_NAMES:
        raise unknown_name("backbone", "backbones", backbone, [*BACKBONE_NAMES, f"{TIMM_PREFIX}NAME"])

"""Pretrained weights from the Hugging Face hub, on the user's say-so: the policy, torch-free.

``--pretrained hub`` takes a vision transformer's weights (DINOv2, CLIP, SigLIP, or ``timm:NAME.TAG``) from
the hub repository timm publishes them in (``timm/<model>.<tag>``); for a backbone with a text tower
(``text_side.TEXT_TOWERS``: CLIP, SigLIP) the file is open_clip's, which holds both towers, in that same repository
(SigLIP's: open_clip's own, ``known_names.OPEN_CLIP_REPOS``). A copy already in the cache is used as it
is, with no network access at all (so offline, ``HF_HUB_OFFLINE=1``, works). A missing one is downloaded only
with the user's consent: ``--allow-download``, ``model.allow_download: true`` or ``RETRIEVAL_ALLOW_DOWNLOAD=1``;
without it the run stops before torch loads with one sentence that names the command to run and the file it
would fetch. The cache is ``--weights-cache`` (``model.weights_cache``), else ``RETRIEVAL_WEIGHTS_CACHE``, else
huggingface_hub's own (``HF_HUB_CACHE``, ``~/.cache/huggingface/hub``). The download, its progress bar and its
checksum are ``training.model.hub_weights``'s.

A CLIP or SigLIP backbone's text tower comes with its hub weights, and a run keeps it only while the image embedding is
the tower's own: ``has_tower_embedding`` (the run's epoch 0 is the image tower's projected embedding,
``training.run.measures.reference``) and ``text_dropped_reason`` (training, or the whitening stage with its ITQ
rotation, moves the image embeddings away from the space the text tower was trained for: one sentence, in
the run summary and in ``model.json``'s ``text_dropped``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.text_side import TEXT_TOWERS
from retrieval.training.config.known_names import (
    OPEN_CLIP_REPOS,
    TIMM_PREFIX,
    VIT_TIMM_NAMES,
    timm_name_of,
)
from retrieval.training.config.train_config import ModelConfig, TrainConfig

HUB_SOURCE = "hub"
ALLOW_ENV = "RETRIEVAL_ALLOW_DOWNLOAD"
CACHE_ENV = "RETRIEVAL_WEIGHTS_CACHE"
HUB_FILES = ("model.safetensors", "pytorch_model.bin")  # timm's weights files in a hub repository, preferred first
OPEN_CLIP_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")  # open_clip's: both towers
_YES = ("1", "true", "yes")
HUB_WEIGHTS_MB = {  # the listed transformers' hub weights in float32 (tests/test_hub_weights.py): timm's whole
    # model, or for TEXT_TOWERS open_clip's (image and text towers)
    "dinov2_vits14": 88,
    "dinov2_vitb14": 346,
    "dinov2_vits14_reg": 88,
    "dinov2_vitb14_reg": 346,
    "clip_vitb16": 598,
    "clip_vitb32": 605,
    "siglip_vitb16": 813,
}
API_CONSENT = "train(..., allow_download=True)"  # how the Python API gives its consent


@dataclass(frozen=True)
class HubAccess:
    """Whether hub weights may be downloaded, and the cache they live in (None: huggingface_hub's default)."""

    allow_download: bool = False
    cache_dir: str | None = None


def hub_access(
    allow_download: bool = False, weights_cache: str | None = None, environ: Mapping[str, str] = os.environ
) -> HubAccess:
    """The run's consent and cache: its config (``--allow-download``, ``--weights-cache``), else the environment."""
    allowed = allow_download or environ.get(ALLOW_ENV, "").strip().lower() in _YES
    cache = weights_cache or environ.get(CACHE_ENV) or None
    return HubAccess(allowed, str(Path(cache).expanduser()) if cache else None)


def model_hub_access(model: ModelConfig) -> HubAccess:
    """``hub_access`` of a run's model section."""
    return hub_access(model.allow_download, model.weights_cache)


def hub_repo(backbone: str) -> str:
    """The hub repository of ``backbone``'s ``--pretrained hub`` weights: open_clip's for a backbone in
    ``OPEN_CLIP_REPOS``, else timm's (``timm_repo``)."""
    return OPEN_CLIP_REPOS.get(backbone) or timm_repo(backbone)


def timm_repo(backbone: str) -> str:
    """The hub repository timm publishes ``backbone``'s weights in (where ``--pretrained imagenet`` finds timm's
    cached copy); ConfigError for a backbone that has none there."""
    timm_name = timm_name_of(backbone)
    if timm_name is None:
        raise ConfigError(
            f"--pretrained hub is for the vision transformers ({', '.join(VIT_TIMM_NAMES)}) and timm:NAME.TAG; "
            f"{backbone} takes --pretrained imagenet, torchvision or a weights file"
        )
    if "." not in timm_name:
        raise ConfigError(
            f"--pretrained hub needs the weights' tag in the timm name, e.g. {TIMM_PREFIX}{timm_name}.augreg_in21k "
            f"(python -c \"import timm; print(timm.list_pretrained('{timm_name}.*'))\" lists them)"
        )
    return f"timm/{timm_name}"


def hub_files(backbone: str) -> tuple[str, ...]:
    """The weights files ``backbone``'s hub repository may hold, preferred first: open_clip's for a backbone
    with a text tower, timm's otherwise."""
    return OPEN_CLIP_FILES if backbone in TEXT_TOWERS else HUB_FILES


def cached_hub_file(repo: str, cache_dir: str | None, files: tuple[str, ...] = HUB_FILES) -> str | None:
    """The weights file of ``repo`` (one of ``files``) already in the cache (no network access), or None."""
    from huggingface_hub import try_to_load_from_cache

    for filename in files:
        path = try_to_load_from_cache(repo, filename, cache_dir=cache_dir)
        if isinstance(path, str):
            return path
    return None


def consent_needed(backbone: str, access: HubAccess, command: str) -> str:
    """The sentence that stops a run whose hub weights are not cached and may not be downloaded: the command
    that allows it and the file it would fetch."""
    from huggingface_hub import constants

    repo = hub_repo(backbone)
    where = access.cache_dir or constants.HF_HUB_CACHE
    return (
        f"the {backbone} weights are not in {where} and downloading needs your consent: run `{command}` to fetch "
        f"{repo}/{hub_files(backbone)[0]} ({download_size(backbone)}) from the Hugging Face hub (or set {ALLOW_ENV}=1)"
    )


def download_size(backbone: str) -> str:
    """The size of ``backbone``'s hub weights file in words, known without asking the hub: the listed
    transformers' from ``HUB_WEIGHTS_MB``; a ``timm:NAME.TAG`` file's is logged when the download starts."""
    megabytes = HUB_WEIGHTS_MB.get(backbone)
    if megabytes is None:
        return "size unknown until the download asks the hub"
    return f"about {megabytes} MB"


def check_hub_consent(model: ModelConfig, command: str) -> None:
    """ConfigError (``consent_needed``) for ``--pretrained hub`` weights that are neither cached nor allowed to
    download; ``command`` is how the caller would rerun with consent."""
    if model.pretrained != HUB_SOURCE:
        return
    access = model_hub_access(model)
    if (
        not access.allow_download
        and cached_hub_file(hub_repo(model.backbone), access.cache_dir, hub_files(model.backbone)) is None
    ):
        raise ConfigError(consent_needed(model.backbone, access, command))


KEEP_HINT = "train with --epochs 0, no whitening and --pretrained hub to keep it"


def has_tower_embedding(model: ModelConfig) -> bool:
    """Whether the model starts from a CLIP or SigLIP tower whose own embedding is its epoch 0."""
    return model.backbone in TEXT_TOWERS and model.pretrained == HUB_SOURCE


def text_dropped_reason(cfg: TrainConfig) -> str | None:
    """One sentence saying why a CLIP or SigLIP run's export has no text side; None when it keeps it, or when
    its backbone has no text tower at all."""
    backbone = cfg.model.backbone
    if backbone not in TEXT_TOWERS:
        return None
    where = f"the {backbone} text tower is not exported"
    if cfg.model.pretrained != HUB_SOURCE:
        return f"{where}: it comes with the hub's open_clip weights (--pretrained hub), not with {cfg.model.pretrained}"
    if cfg.trainer.epochs > 0:
        return f"{where}: training changes the image space the text tower was trained against ({KEEP_HINT})"
    if cfg.whitening.method != "none":
        return (
            f"{where}: the whitening stage (and its ITQ rotation) changes the image space the text tower was "
            f"trained against ({KEEP_HINT})"
        )
    return None

"""The smallest image a backbone can see, known from its name before torch loads.

A convolutional trunk halves the image five times (an output stride of 32): at 32 px its last stage sees
one pixel, below that less than one, and what it learns is noise. A vision transformer cuts the image into
patches of P px (P is in its timm name, ``vit_small_patch14_...``): it needs one patch at least (14 px for
DINOv2, 16 for CLIP ViT-B/16 and SigLIP, 32 for CLIP ViT-B/32), and a size that is a multiple of P, since a
partial patch would be dropped.
"""

from __future__ import annotations

import re

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.known_names import timm_name_of

MIN_IMAGE_SIZE = 32  # a convolutional trunk's output stride
_VIT_PATCH = re.compile(r"^(?:vit|deit3?)_\w*?patch(\d+)")  # timm's VisionTransformer names


def patch_size_of(backbone: str) -> int | None:
    """The patch size of a vision transformer backbone (listed or ``timm:NAME``), read from its timm name;
    None for a convolutional trunk."""
    match = _VIT_PATCH.match(timm_name_of(backbone) or "")
    return int(match.group(1)) if match else None


def check_image_size(backbone: str, image_size: int) -> None:
    """ConfigError for an image ``backbone`` cannot see: below 32 px for a convolutional trunk; below one patch,
    or not a whole number of patches, for a vision transformer."""
    patch = patch_size_of(backbone)
    if patch is None and image_size < MIN_IMAGE_SIZE:
        raise ConfigError(
            f"data.image_size {image_size} is below {MIN_IMAGE_SIZE} px, the smallest image {backbone} can see "
            f"(it downsamples 32x); use --image-size {MIN_IMAGE_SIZE} or more (images are resized to it)"
        )
    if patch is not None:
        check_patch_multiple(backbone, image_size, patch)


def check_patch_multiple(name: str, image_size: int, patch: int) -> None:
    """ConfigError unless ``image_size`` is a multiple of the patch size (a partial patch would be dropped)."""
    if image_size % patch:
        lower, upper = image_size // patch * patch, (image_size // patch + 1) * patch
        sizes = f"{lower} or {upper}" if lower else str(upper)
        raise ConfigError(f"data.image_size {image_size} is not a multiple of {name}'s patch size {patch}; use {sizes}")

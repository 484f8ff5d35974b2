"""Whether a run's export keeps the text tower beside its image tower, decided from the run's config alone.

A CLIP backbone (``known_names.TEXT_TOWERS``) started from the hub's CLIP weights (``--pretrained hub``) has a
text tower trained against its image tower: the run's epoch 0 is that image tower's own projected embedding
(``training.run.measures.reference``), and a training-free run (``--epochs 0``, no whitening stage) exports it
with ``text.onnx`` and ``tokenizer.json`` beside it. Training, or the whitening stage with its ITQ rotation,
moves the image embeddings away from the space the text tower was trained for, so the text side is dropped,
and ``text_dropped_reason``'s sentence says so in the run summary and in ``model.json``.
"""

from __future__ import annotations

from retrieval.training.config.hub_access import HUB_SOURCE
from retrieval.training.config.known_names import TEXT_TOWERS
from retrieval.training.config.train_config import ModelConfig, TrainConfig

KEEP_HINT = "train with --epochs 0, no whitening and --pretrained hub to keep it"


def has_tower_embedding(model: ModelConfig) -> bool:
    """Whether the model starts from a CLIP tower whose own projected embedding is its epoch 0."""
    return model.backbone in TEXT_TOWERS and model.pretrained == HUB_SOURCE


def text_dropped_reason(cfg: TrainConfig) -> str | None:
    """One sentence saying why a CLIP run's export has no text side; None when it keeps it, or when its backbone
    has no text tower at all."""
    backbone = cfg.model.backbone
    if backbone not in TEXT_TOWERS:
        return None
    where = f"the {backbone} text tower is not exported"
    if cfg.model.pretrained != HUB_SOURCE:
        return f"{where}: it comes with the hub's CLIP weights (--pretrained hub), not with {cfg.model.pretrained}"
    if cfg.trainer.epochs > 0:
        return f"{where}: training changes the image space the text tower was trained against ({KEEP_HINT})"
    if cfg.whitening.method != "none":
        return (
            f"{where}: the whitening stage (and its ITQ rotation) changes the image space the text tower was "
            f"trained against ({KEEP_HINT})"
        )
    return None


def keeps_text(cfg: TrainConfig) -> bool:
    """Whether the run's export carries the text tower."""
    return cfg.model.backbone in TEXT_TOWERS and text_dropped_reason(cfg) is None

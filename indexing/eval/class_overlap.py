"""Did an evaluation include classes the model was trained on? (``model.json``'s ``training_classes``)

Deep-metric-learning numbers mean retrieval of classes never seen in training; an index built
from ``--split all`` or ``train`` mixes in training classes and overstates that quality.
"""

from __future__ import annotations

from collections.abc import Iterable

from retrieval.indexing.exported_model.model_manifest import ModelManifest

SHOWN = 3


def training_classes_in(labels: Iterable[str], manifest: ModelManifest) -> list[str]:
    """The evaluated labels that are training classes of the model, sorted (empty when the export
    records none, as exports written before the field existed, and for a run that trained no epoch: its
    model is the starting backbone, whose centring saw the training images but no label)."""
    if manifest.verdict is not None and manifest.verdict.decision == "no-training":
        return []  # --epochs 0: no weight saw a label, so no class of it was trained on
    return sorted({str(label) for label in labels} & set(manifest.training_classes))


def overlap_warning(overlap: list[str], num_classes: int) -> str:
    shown = ", ".join(overlap[:SHOWN]) + (", ..." if len(overlap) > SHOWN else "")
    return (
        f"{len(overlap)} of the {num_classes} evaluated classes were training classes of the model ({shown}); "
        "metrics on them overstate retrieval of unseen classes: evaluate the test split "
        "(`retrieval index build --split test`, `retrieval eval --split test`)"
    )

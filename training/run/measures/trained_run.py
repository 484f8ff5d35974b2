"""What a finished training run reports, typed: ``TrainedRun`` (the run directory, the chosen epoch, the test
metrics and the verdict) as the Python API returns it and ``retrieval train`` prints it.

It is read from the trainer's result (``test_metrics.json``'s document), so the file, the terminal and the
API say the same thing. ``run.test.reference`` is the starting backbone's row whatever its name
("pretrained" or "untrained"); ``run.test`` is None when the run kept no classes apart to test on
(``data.split: none``), and with a final fit (``trainer.final_fit``) it holds the first fit's figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.indexing.eval.metrics import RetrievalMetrics
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict

REFERENCE_NAMES = ("pretrained", "untrained")


@dataclass(frozen=True)
class ReferenceMetrics:
    """The starting backbone's pooled features on the same test classes (the reference row)."""

    name: str  # "pretrained" or "untrained"
    float_metrics: RetrievalMetrics
    binary_metrics: RetrievalMetrics


@dataclass(frozen=True)
class TestMetrics:
    """The chosen model's metrics on the test classes, next to the starting backbone's."""

    best_epoch: int
    float_metrics: RetrievalMetrics
    binary_metrics: RetrievalMetrics
    reference: ReferenceMetrics | None  # None when trainer.evaluate_untrained_test is off
    num_classes: int
    num_images: int
    whitened_reference: ReferenceMetrics | None = None  # the reference + its whitening stage, where the run has one

    @property
    def map_at_r(self) -> float:
        """Float MAP@R, the primary metric."""
        return self.float_metrics.map_at_r

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> TestMetrics:
        """The document the trainer writes as ``test_metrics.json``."""
        name = next((name for name in REFERENCE_NAMES if name in document), None)
        reference = _reference(document, name, name) if name is not None else None
        whitened = _reference(document, f"{name}_whitened", f"{name} + whitening") if name is not None else None
        return cls(
            best_epoch=int(document["best_epoch"]),
            float_metrics=RetrievalMetrics.from_dict(document["float"]),
            binary_metrics=RetrievalMetrics.from_dict(document["binary"]),
            reference=reference,
            num_classes=int(document.get("num_test_classes", 0)),
            num_images=int(document.get("num_test_images", 0)),
            whitened_reference=whitened,
        )


def _reference(document: Mapping[str, Any], key: str, name: str) -> ReferenceMetrics | None:
    row = document.get(key)
    if not isinstance(row, Mapping):
        return None
    return ReferenceMetrics(name, RetrievalMetrics.from_dict(row["float"]), RetrievalMetrics.from_dict(row["binary"]))


@dataclass(frozen=True)
class FinalFit:
    """``trainer.final_fit``: after the class-disjoint fit chose ``epochs``, the run's model was trained again
    on every class for that many epochs (``selection_dir`` keeps the first fit)."""

    epochs: int
    num_classes: int
    selection_dir: Path

    def sentence(self) -> str:
        if self.epochs == 0:
            return (
                f"final fit: none, the class-disjoint fit kept the starting backbone, so it is the model for all "
                f"{self.num_classes} classes; the test figures come from that first fit ({self.selection_dir})"
            )
        return (
            f"final fit: retrained on all {self.num_classes} classes for {epochs_text(self.epochs)} (the number the "
            f"class-disjoint fit chose); the test figures come from that first fit ({self.selection_dir})"
        )


@dataclass(frozen=True)
class TrainedRun:
    """A finished run: ``retrieval export run_dir`` exports its model."""

    run_dir: Path
    best_epoch: int
    epochs_completed: int
    test: TestMetrics | None  # None: every class trained (data.split none), nothing held out to test on
    verdict: TrainingVerdict | None  # str(run.verdict): its sentence; None: the run wrote none
    final_fit: FinalFit | None = None
    calibration: Mapping[str, Any] | None = None  # test_metrics.json's calibration block (indexing.probability)

    @classmethod
    def of(
        cls,
        run_dir: Path,
        best_epoch: int,
        epochs_completed: int,
        test: Mapping[str, Any],
        final_fit: FinalFit | None = None,
    ) -> TrainedRun:
        """From the trainer's result: ``test`` is its test document (empty when nothing was tested)."""
        verdict = TrainingVerdict.model_validate(test["verdict"]) if test and test.get("verdict") else None
        metrics = TestMetrics.from_dict(test) if test and "float" in test else None
        calibration = test.get("calibration") if test else None
        return cls(Path(run_dir), best_epoch, epochs_completed, metrics, verdict, final_fit, calibration)


def epochs_text(count: int) -> str:
    """``1 epoch``, ``3 epochs``."""
    return f"{count} epoch" if count == 1 else f"{count} epochs"

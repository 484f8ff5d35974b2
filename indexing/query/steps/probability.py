"""``probability`` and ``min_probability``: each hit's probability, its score read through the model's
calibration (``model.json``'s, which the index keeps), then the ``min_probability`` cut-off. Float and
re-ranked searches read the float curve, plain binary ones the binary curve; post-processed scores (qe,
kreciprocal) are no longer the scores it was fitted on, so their hits carry none and ``min_probability`` is
refused with them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.score_calibration import (
    FINAL_FIT_WITHOUT_CALIBRATION,
    NO_CALIBRATION,
    NO_MODEL_CALIBRATION,
    CalibrationKind,
    ScoreCalibration,
    require_calibration,
)
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.no_model import has_model
from retrieval.indexing.query.steps.step import BaseStep, HitPage, StepContext
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.search_settings import SearchSettings

_KINDS: dict[str, CalibrationKind] = {"cosine": "float", "hamming": "binary"}


def calibration_kind(settings: SearchSettings) -> CalibrationKind | None:
    """The curve that reads these settings' scores; None when they are post-processed."""
    return _KINDS.get(settings.score_kind) if settings.postprocess == "none" else None


def no_calibration_reason(model: ModelManifest) -> str:
    """Why an index's model (``IndexManifest.model``) has no calibration, in words that fit it."""
    if not has_model(model):
        return NO_MODEL_CALIBRATION
    final_fit = model.verdict is not None and "final fit: " in model.verdict.sentence  # never --split none
    return FINAL_FIT_WITHOUT_CALIBRATION if final_fit else NO_CALIBRATION


def check_min_probability(model: ModelManifest, settings: SearchSettings) -> None:
    """A DataError, before searching, when ``min_probability`` or ``cutoff=auto`` cannot be applied with
    ``model``'s calibration."""
    if settings.min_probability is None and settings.cutoff == "none":
        return
    name = "min_probability" if settings.min_probability is not None else "cutoff=auto"
    require_calibration(model.calibration, no_calibration_reason(model), name)
    if calibration_kind(settings) is None:
        raise DataError(
            f"{name} cannot be combined with postprocess {settings.postprocess}: its scores are not "
            "the ones the calibration was fitted on"
        )


def with_probabilities(hits: list[Hit], calibration: ScoreCalibration | None, settings: SearchSettings) -> list[Hit]:
    """The hits with their probability (unchanged where there is no calibration for these settings)."""
    kind = calibration_kind(settings)
    if calibration is None or kind is None or not hits:
        return hits
    probabilities = calibration.probabilities(kind, np.array([hit.score for hit in hits]))
    return [Hit(hit.item, hit.score, float(p)) for hit, p in zip(hits, probabilities, strict=True)]


class Probability(BaseStep):
    """Every hit's probability (when the model has a calibration), then the ``min_probability`` cut."""

    name = "probability"

    def applies(self, settings: SearchSettings) -> bool:
        return True

    def check(self, context: StepContext) -> None:
        check_min_probability(context.store.manifest.model, context.settings)

    def apply(self, page: HitPage, context: StepContext) -> HitPage:
        hits = with_probabilities(page.hits, context.traits.calibration, context.settings)
        cut = context.settings.min_probability
        kept = [hit for hit in hits if cut is None or (hit.probability is not None and hit.probability >= cut)]
        return replace(page, hits=kept, below_min_probability=page.below_min_probability + len(hits) - len(kept))

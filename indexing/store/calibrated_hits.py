"""Each hit's ``probability``: its score read through the model's calibration (``model.json``'s, which the
index keeps), and the ``min_probability`` cut-off. Float and re-ranked searches read the float curve, plain
binary ones the binary curve; post-processed scores (qe, kreciprocal) are no longer the scores it was fitted
on, so their hits carry none and ``min_probability`` is refused with them."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.score_calibration import CalibrationKind, ScoreCalibration, require_calibration
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.search_settings import SearchSettings

_KINDS: dict[str, CalibrationKind] = {"cosine": "float", "hamming": "binary"}


def calibration_kind(settings: SearchSettings) -> CalibrationKind | None:
    """The curve that reads these settings' scores; None when they are post-processed."""
    return _KINDS.get(settings.score_kind) if settings.postprocess == "none" else None


def check_min_probability(calibration: ScoreCalibration | None, settings: SearchSettings) -> None:
    """A DataError, before searching, when ``min_probability`` or ``cutoff=auto`` cannot be applied."""
    if settings.min_probability is None and settings.cutoff == "none":
        return
    name = "min_probability" if settings.min_probability is not None else "cutoff=auto"
    require_calibration(calibration, name)
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

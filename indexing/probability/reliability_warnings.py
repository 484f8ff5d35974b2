"""The sentences a response carries when the probabilities on its hits rest on an unreliable calibration
(``ScoreCalibration.reliable`` false: fewer validation classes than ``MIN_CALIBRATION_CLASSES``). Every door
(the HTTP search and similar routes, form or JSON, the CLI, the Python API) shows them in ``warnings``; one
sentence for the probabilities, one more when ``min_probability`` cuts on them."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.common.score_calibration import CalibrationKind, ScoreCalibration

SHOWN_PROBABILITY = 0.8  # the probability whose interval the first sentence quotes


def interval_text(calibration: ScoreCalibration, kind: CalibrationKind, probability: float) -> str:
    """'from L to H': the 95 % interval of ``probability`` on the ``kind`` curve (empty: no interval stored)."""
    curve = calibration.curves[kind]
    score = float(np.interp(probability, curve.probabilities, curve.scores))
    bounds = calibration.bounds(kind, np.array([score]))
    if bounds is None:
        return ""
    return f"{bounds[0][0]:.2f} to {bounds[1][0]:.2f}"


def reliability_warnings(
    calibration: ScoreCalibration | None, kind: CalibrationKind | None, min_probability: float | None
) -> list[str]:
    """The warnings of a search whose hits read ``kind``'s curve (None: they carry no probability)."""
    if calibration is None or kind is None or calibration.reliable:
        return []
    classes = calibration.fitted_on.classes
    width = interval_text(calibration, kind, SHOWN_PROBABILITY)
    shown = f"; a hit shown at {SHOWN_PROBABILITY:g} may share the query's class anywhere from {width}" if width else ""
    warnings = [
        f"the probabilities are unreliable: the calibration rests on {classes} validation classes, too few to "
        f"carry over to other classes{shown} (retrain with more validation classes, --val-fraction)"
    ]
    if min_probability is not None:
        at_cut = interval_text(calibration, kind, min_probability)
        measured = f" (its 95 % interval at {min_probability:g}: {at_cut})" if at_cut else ""
        warnings.append(
            f"min_probability {min_probability:g} cuts on an unreliable calibration: the hits kept may share the "
            f"query's class far less often than {min_probability:g}{measured}; min_score is a cut-off that does "
            "not depend on it"
        )
    return warnings

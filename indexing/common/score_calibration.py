"""``ScoreCalibration``: ``model.json``'s map from a hit's score to the probability that it shares the query's
class, fitted on the run's validation classes (``retrieval.training.run.measures.calibration_fit``).

The curve is fitted on what a search shows: each validation query's first ``HITS_PER_QUERY`` hits, searched in a
gallery of the validation images plus the training images (``CalibrationFit.distractors``: classes the queries
are not of). That is how the base rate is handled: a query's first hits are its own class and its look-alikes,
and how many look-alikes reach them grows with the classes in the gallery; 5 or 20 validation classes alone
make a gallery with far fewer than the test's 25 or 98, and a curve fitted there says "more likely" than the
test classes bear out. With the training classes beside them the fitting gallery holds as many classes as the
test gallery (the default split halves the classes). The curve is Platt's logistic fit, chosen over isotonic
regression and over query-adaptive scores on class halves of the validation and training classes, never on the
test classes (docs/results.md). The alternatives are measured beside it on the same test hits by
``bench/bench_calibration.py`` (``bench/calibration_alternatives.py``), not by every training run.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from retrieval.indexing.common.errors import DataError

CalibrationKind = Literal["float", "binary"]
MAX_KNOTS = 256
HITS_PER_QUERY = 10  # the hits of each query a fit and a report weigh: a first page of results
MIN_CALIBRATION_CLASSES = 5  # the verdict's bar (indexing.data.splits.MIN_VALIDATION_CLASSES)
_EDGE = 1e-6  # probabilities are kept inside (0, 1) so that the odds stay finite
NO_CALIBRATION = (
    "this model has no calibration (its run kept no validation classes to fit one on: --split none), so hits carry "
    "no probability; filter by score instead (min_score), or train with --final-fit instead of --split none (it "
    "keeps the calibration of the fit that measures: `retrieval train --data DIR --out RUN --epochs 0 --final-fit`), "
    "then export and index that run"
)
FINAL_FIT_WITHOUT_CALIBRATION = (
    "this model's final fit (--final-fit) was exported without the calibration of the fit that measured it (an "
    "older version dropped it), so hits carry no probability; `retrieval export RUN` again carries it over, then "
    "rebuild the index with `retrieval index build`"
)
NO_MODEL_CALIBRATION = (
    "this index was built from vectors alone: no model, so nothing calibrated its scores and hits carry no "
    "probability; filter by score instead (min_score)"
)


class CalibrationCurve(BaseModel):
    """A non-decreasing curve through ``(scores[i], probabilities[i])``, straight between knots, flat beyond."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["isotonic", "logistic"]
    scores: list[float] = Field(description="knots, ascending")
    probabilities: list[float] = Field(description="P(same class) at each knot, at the fitted base rate")

    @model_validator(mode="after")
    def _monotone(self) -> CalibrationCurve:
        if len(self.scores) != len(self.probabilities) or not self.scores:
            raise ValueError("a calibration curve needs as many probabilities as scores, at least one")
        if np.any(np.diff(self.scores) < 0) or np.any(np.diff(self.probabilities) < 0):
            raise ValueError("a calibration curve's scores and probabilities must both be non-decreasing")
        return self

    @classmethod
    def of(
        cls, method: Literal["isotonic", "logistic"], scores: np.ndarray, probabilities: np.ndarray, max_knots: int
    ) -> CalibrationCurve:
        """The curve through these knots, thinned to at most ``max_knots`` evenly spaced ones (both ends kept):
        a subset of a monotone curve's knots is monotone too."""
        if len(scores) > max_knots:
            keep = np.unique(np.round(np.linspace(0, len(scores) - 1, max_knots)).astype(np.int64))
            scores, probabilities = scores[keep], probabilities[keep]
        values = np.clip(probabilities, _EDGE, 1 - _EDGE)
        return cls(method=method, scores=[float(s) for s in scores], probabilities=[float(p) for p in values])

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        """P(same class) of each score at the fitted base rate."""
        return np.interp(np.asarray(scores, np.float64), self.scores, self.probabilities)


class CalibrationFit(BaseModel):
    """What the curves were fitted on: the validation classes' queries and their first hits in their gallery."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    classes: int = Field(ge=0)
    queries: int = Field(ge=0)
    pairs: int = Field(ge=0, description="(query, hit) pairs: each query's first hits, never itself")
    same_class_pairs: int = Field(ge=0)
    hits_per_query: int = Field(HITS_PER_QUERY, ge=1)
    gallery: int = Field(0, ge=0, description="images searched (0: not recorded, an older model.json)")
    distractors: int = Field(
        0, ge=0, description="of them, images of classes no query is of (the training images; 0: none or not recorded)"
    )

    @property
    def base_rate(self) -> float:
        return self.same_class_pairs / self.pairs if self.pairs else 0.0


class MeasuredFit(BaseModel):
    """``trainer.final_fit``: the calibration was fitted with the class-disjoint fit's model and kept for the final
    fit's (which has no validation classes left to fit on): what that measured model was trained on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epochs: int = Field(ge=0, description="the epochs the class-disjoint fit chose (and the final fit trained)")
    training_classes: int = Field(ge=0, description="the classes the class-disjoint fit trained on")
    final_classes: int = Field(ge=0, description="the classes the final fit trained on (every class)")
    selection: str = Field("", description="the class-disjoint fit's run directory")

    def sentence(self) -> str:
        return (
            f"fitted with the class-disjoint fit's model ({self.training_classes} training classes, "
            f"{self.epochs} epoch{'' if self.epochs == 1 else 's'}) and kept for the final fit on all "
            f"{self.final_classes} classes"
        )


class LogitInterval(BaseModel):
    """The class-jackknife covariance of one curve's (slope, intercept) and the multiplier of its interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    classes: int = Field(ge=0, description="the fitting classes the jackknife left out one at a time")
    covariance: list[list[float]] = Field(description="2 x 2, of (slope, intercept)")
    multiplier: float = Field(description="Student's t 97.5 % quantile with classes - 1 degrees of freedom")

    def bounds(self, scores: np.ndarray, probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of each probability (fitted at ``scores``), a 95 % interval over fitting classes."""
        p = np.clip(np.asarray(probabilities, np.float64), 1e-9, 1 - 1e-9)
        if self.classes < 2:
            return np.zeros_like(p), np.ones_like(p)
        x = np.stack([np.asarray(scores, np.float64), np.ones(len(p))], axis=1)
        spread = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", x, np.array(self.covariance), x), 0.0))
        logit = np.log(p / (1 - p))
        return _sigmoid(logit - self.multiplier * spread), _sigmoid(logit + self.multiplier * spread)


class ScoreCalibration(BaseModel):
    """The float and binary curves and what they rest on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    split: str = "validation"
    curves: dict[CalibrationKind, CalibrationCurve]
    fitted_on: CalibrationFit
    reliable: bool = Field(description="false: fitted on too few classes to carry over to other classes")
    sentence: str
    measured_fit: MeasuredFit | None = Field(
        None, description="trainer.final_fit: the class-disjoint fit whose calibration the final model keeps"
    )
    interval: dict[CalibrationKind, LogitInterval] | None = Field(
        None, description="per kind, the class-jackknife width of its fit (none: an older model.json)"
    )

    def kept_for_final_fit(self, measured: MeasuredFit) -> ScoreCalibration:
        """This calibration, carried over to a final fit's model, saying so in its sentence."""
        return self.model_copy(update={"measured_fit": measured, "sentence": f"{self.sentence}; {measured.sentence()}"})

    def probabilities(self, kind: CalibrationKind, scores: np.ndarray) -> np.ndarray:
        """P(same class) of hits scoring ``scores`` of ``kind``."""
        return self.curves[kind](scores)

    def bounds(self, kind: CalibrationKind, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(low, high) of the probabilities of ``scores``, a 95 % interval over fitting classes; None when the
        model.json predates intervals."""
        if self.interval is None or kind not in self.interval:
            return None
        return self.interval[kind].bounds(scores, self.probabilities(kind, scores))


def _sigmoid(values: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(values, -30, 30)))


def shift_base_rate(probabilities: np.ndarray, fitted: float, target: float) -> np.ndarray:
    """Bayes' rule on the odds: a likelihood ratio measured at base rate ``fitted`` applied at ``target``."""
    p = np.clip(np.asarray(probabilities, np.float64), _EDGE, 1 - _EDGE)
    if not 0 < fitted < 1 or not 0 < target < 1:
        return p
    odds = p / (1 - p) * (target / (1 - target)) / (fitted / (1 - fitted))
    return odds / (1 + odds)


def calibration_sentence(fit: CalibrationFit) -> str:
    """One sentence for ``retrieval index info``, the train summary and model.json."""
    basis = (
        f"calibrated on {fit.classes} validation classes ({fit.queries} queries, their first {fit.hits_per_query} "
        f"hits: {fit.pairs} pairs{_gallery_text(fit)})"
    )
    if fit.classes >= MIN_CALIBRATION_CLASSES:
        return basis
    return (
        f"unreliable calibration: it rests on {fit.classes} validation classes, too few for its probabilities to "
        f"carry over to other classes (add classes or raise --val-fraction); {basis}"
    )


def _gallery_text(fit: CalibrationFit) -> str:
    if not fit.distractors:
        return ""
    return f", searched among {fit.gallery} images, {fit.distractors} of them training images of other classes"


class NoCalibrationError(DataError):
    """``min_probability`` asked of an index whose model has no calibration (the service answers 400 on every
    door: forms, query parameters and JSON bodies)."""


def require_calibration(
    calibration: ScoreCalibration | None, reason: str = NO_CALIBRATION, option: str = "min_probability"
) -> ScoreCalibration:
    """The calibration, or the one sentence that refuses ``option`` (min_probability, cutoff=auto) without it
    (``reason``: why the index has none)."""
    if calibration is None:
        raise NoCalibrationError(f"{option} cannot be applied: {reason}")
    return calibration

"""The training run's verdict as data: ``TrainingVerdict`` (``test_metrics.json``'s ``verdict``, ``model.json``'s,
``retrieval index info``, ``TrainedRun.verdict``) and the ``GainInterval`` it rests on.

A gain is MAP@R after minus MAP@R before, over the same queries; its interval comes from a paired bootstrap of
the per-query AP (``retrieval.indexing.eval.gain_interval``, docs/metrics.md). The training side decides and words
it (``retrieval.training.run.measures.verdict``); this module only holds what was decided, so an export and an index, which
never import torch, read it typed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Decision = Literal["trained", "reference", "no-training", "unmeasured"]
"""``trained``: a trained epoch is the run's model; ``reference``: the starting backbone is kept (no epoch beat
it beyond validation noise); ``no-training``: ``--epochs 0``; ``unmeasured``: nothing held out to measure on."""


CEILING = 0.9995
"""A MAP@R that prints as 1.000: every query already finds its class first, so no gain can be measured."""


class GainInterval(BaseModel):
    """MAP@R ``before`` -> ``after`` on ``queries`` paired queries, and the bootstrap interval of the gain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    before: float
    after: float
    low: float = Field(description="lower end of the gain's interval (MAP@R points)")
    high: float = Field(description="upper end of the gain's interval (MAP@R points)")
    queries: int = Field(ge=0, description="paired queries the interval was resampled from")
    confidence: float = Field(gt=0, lt=1)
    resamples: int = Field(ge=1)
    seed: int

    @property
    def gain(self) -> float:
        return self.after - self.before

    @property
    def above_noise(self) -> bool:
        """The whole interval is above zero: a gain the resampled queries do not explain away."""
        return self.low > 0

    @property
    def below_noise(self) -> bool:
        """The whole interval is below zero: a loss beyond the noise of these queries."""
        return self.high < 0

    @property
    def at_ceiling(self) -> bool:
        """MAP@R was already (printed) 1.000 before: these queries cannot show a gain, nor its interval."""
        return self.before >= CEILING

    def relative(self, value: float) -> float | None:
        """``value`` (a gain or an end of the interval) as a fraction of ``before``; None when ``before`` is 0."""
        return value / self.before if self.before > 0 else None


class DataCopies(BaseModel):
    """The exact copies (the same decoded pixels) among the run's images, as ``retrieval data check`` counts
    them: pairs within a class, across classes (possible label noise) and across the run's split (a leak)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    within_class: int = Field(ge=0)
    across_classes: int = Field(ge=0)
    across_split: int = Field(ge=0)

    def sentence(self) -> str | None:
        """What a reader of the verdict must know (None: no copy crosses a class or the split)."""
        found = [
            f"{self.across_classes} across classes (label noise?)" if self.across_classes else "",
            f"{self.across_split} across the split (a leak that inflates the test figures)"
            if self.across_split
            else "",
        ]
        if not any(found):
            return None
        return (
            f"the data holds exact copy pairs: {', '.join(part for part in found if part)} "
            "(`retrieval data duplicates DIR --out OUT --exclude-list FILE`, then `--exclude FILE`)"
        )


class TrainingVerdict(BaseModel):
    """What the run decided, the sentence that says it, and the counts it rests on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sentence: str
    decision: Decision
    reference: str | None = Field(None, description="the starting backbone: 'pretrained' or 'untrained'")
    best_epoch: int | None = Field(None, description="the run's model's epoch (0: the starting backbone)")
    candidate_epoch: int | None = Field(None, description="the epoch with the best validation MAP@R")
    validation: GainInterval | None = Field(None, description="the candidate epoch against epoch 0, validation")
    test: GainInterval | None = Field(None, description="the run's model against epoch 0 on the test classes")
    validation_classes: int | None = None
    validation_queries: int | None = None
    reliable: bool | None = Field(
        None, description="false: too few validation classes or queries to tell a gain from noise"
    )
    data_copies: DataCopies | None = Field(
        None, description="the exact copies among the run's images (as `retrieval data check` counts them)"
    )

    @model_validator(mode="before")
    @classmethod
    def _from_sentence(cls, value: Any) -> Any:
        """A ``model.json`` written before the verdict was typed holds its sentence alone."""
        return {"sentence": value, "decision": "unmeasured"} if isinstance(value, str) else value

    def __str__(self) -> str:
        return self.sentence

    def figures(self) -> str:
        """``reference kept; validation gain +0.006 (95 % interval -0.030 to +0.041) on 60 queries of 2 classes``."""
        parts = [
            {"trained": "trained epoch kept", "reference": "starting backbone kept"}.get(self.decision, self.decision)
        ]
        if self.validation is not None and self.validation.at_ceiling:
            parts.append(
                f"validation MAP@R {self.validation.before:.3f} before training, its ceiling: no gain measurable on "
                f"{self.validation_queries} queries of {self.validation_classes} classes"
            )
        elif self.validation is not None and self.candidate_epoch == 0:  # epoch 0 against itself: no interval
            parts.append(
                f"validation: no epoch beat epoch 0's MAP@R {self.validation.before:.3f} on "
                f"{self.validation_queries} queries of {self.validation_classes} classes"
                + ("" if self.reliable else " (unreliable)")
            )
        elif self.validation is not None:
            parts.append(
                f"validation {_interval(self.validation)} on {self.validation_queries} queries of "
                f"{self.validation_classes} classes" + ("" if self.reliable else " (unreliable)")
            )
        if self.test is not None:
            parts.append(f"test {_interval(self.test)} on {self.test.queries} queries")
        return "; ".join(parts)

    def with_sentence(self, sentence: str) -> TrainingVerdict:
        return self.model_copy(update={"sentence": sentence})


def _interval(gain: GainInterval) -> str:
    percent = f"{gain.confidence * 100:.0f} %"
    return f"gain {gain.gain:+.3f} ({percent} interval {gain.low:+.3f} to {gain.high:+.3f})"

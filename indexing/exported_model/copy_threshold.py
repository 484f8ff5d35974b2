"""The similarity above which two images are copies of one another, as measured for one model.

``model.json``'s ``duplicates`` block: written at export (``search.copy_calibration`` measures it on
synthetic copies of the run's training images), read by ``retrieval data duplicates`` and
``retrieval index duplicates`` as their default threshold.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

COPY_KINDS = ("jpeg", "resize", "crop", "recolour")
TARGET_COPY_RECALL = 0.99
MAX_DISTINCT_RATE = 0.01


PIXEL_CHECK = (
    "on the pixel signatures' correlation (data.copy_signature), the check of candidate pairs; None in a "
    "model.json written before it was measured (no pixel check then)"
)
CANDIDATES = (
    "the cosine that proposes candidates when the pixel check follows: the distinct pairs' end of the gap "
    "(the lowest score admitting at most max_distinct_rate); None before it was measured"
)


class ThresholdRates(BaseModel):
    """One threshold (float cosine or binary code similarity) and what it admits."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(ge=-1.0, le=1.0)
    copy_recall: float = Field(ge=0.0, le=1.0, description="share of the synthetic copies at or above it")
    distinct_rate: float = Field(ge=0.0, le=1.0, description="share of distinct same-class pairs at or above it")

    def sentence(self, copies: int, distinct_pairs: int) -> str:
        return (
            f"{self.threshold:.4f} (keeps {100 * self.copy_recall:.1f}% of {copies} synthetic copies, admits "
            f"{100 * self.distinct_rate:.1f}% of {distinct_pairs} distinct same-class pairs)"
        )


class CopyThreshold(BaseModel):
    """The measured copy thresholds of a model, float and binary, with their two rates each."""

    model_config = ConfigDict(extra="forbid")

    float_threshold: ThresholdRates = Field(description="on the cosine similarity of the float embeddings")
    binary_threshold: ThresholdRates = Field(description="on the similarity of the sign codes, 1 - 2 hamming / bits")
    pixel_threshold: ThresholdRates | None = Field(None, description=PIXEL_CHECK)
    candidate_threshold: ThresholdRates | None = Field(None, description=CANDIDATES)
    candidate_binary_threshold: ThresholdRates | None = Field(None, description="as candidate_threshold, on codes")
    images: int = Field(ge=0, description="originals embedded")
    copies: int = Field(ge=0, description="synthetic copies: " + ", ".join(COPY_KINDS) + " of each original")
    distinct_pairs: int = Field(ge=0, description="pairs of distinct images of one class")
    target_copy_recall: float = TARGET_COPY_RECALL
    max_distinct_rate: float = MAX_DISTINCT_RATE
    measured_on: str = Field("", description="the images the copies were made of")

    def sentence(self) -> str:
        """The thresholds and their rates in one line, as the commands print them."""
        return (
            f"copy threshold {self.float_threshold.sentence(self.copies, self.distinct_pairs)}; "
            f"binary {self.binary_threshold.sentence(self.copies, self.distinct_pairs)}; "
            + (
                f"pixel check {self.pixel_threshold.sentence(self.copies, self.distinct_pairs)}"
                if self.pixel_threshold
                else "no pixel check (not measured)"
            )
            + (
                f"; with it, candidates from {self.candidate_threshold.sentence(self.copies, self.distinct_pairs)}"
                if self.pixel_threshold and self.candidate_threshold
                else ""
            )
        )

"""The thresholds a duplicates search runs with: the model's measured ones, or the user's ``--threshold``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.copy_threshold import CopyThreshold

NOT_MEASURED = (
    "the model's model.json holds no measured copy threshold (exported before thresholds were measured, or its "
    "training images could not be read then; `retrieval export RUN` measures it again)"
)
"""Why there is no measured copy threshold, for a model that could have one."""
NO_MODEL = "this index was built from vectors alone, so no model measured a copy threshold for it"
"""Why a vectors-only index has none (a given threshold serves)."""


class NoCopyThresholdError(ConfigError):
    """No threshold given and none measured: it will not change by retrying (the service answers 409)."""

    def __init__(
        self, reason: str, advice: str = "give a copy threshold (--threshold; over HTTP the query parameter threshold)"
    ) -> None:
        super().__init__(f"{reason}; {advice}")
        self.reason = reason


@dataclass(frozen=True)
class CopyThresholds:
    """The cosine similarity a pair must reach (``cosine``), the code similarity that admits a candidate
    pair before the float re-check (``binary``), the pixel signatures' correlation a candidate must then
    reach (``pixel``: the model's measured one; None when it was not measured, or the check is off), and
    where they come from, in words."""

    cosine: float
    binary: float
    source: str
    pixel: float | None = None


def check_threshold(value: float) -> float:
    """``value`` when it is a similarity in [-1, 1], else a ConfigError in one sentence."""
    if not -1.0 <= value <= 1.0:
        raise ConfigError(f"--threshold must be a cosine similarity in [-1, 1], got {value:g}")
    return float(value)


def binary_equivalent(cosine: float) -> float:
    """The expected code similarity of two vectors at cosine ``cosine`` (sign agreement: 1 - 2 angle / pi)."""
    return 1.0 - 2.0 * math.acos(max(-1.0, min(1.0, cosine))) / math.pi


def copy_thresholds(
    measured: CopyThreshold | None, override: float | None, *, verify: bool = True, missing: str = NOT_MEASURED
) -> CopyThresholds:
    """``override`` (checked) when given, else the measured thresholds; neither is a NoCopyThresholdError saying
    ``missing`` (why there is none). The measured pixel threshold applies either way unless ``verify`` is False."""
    pixel = measured.pixel_threshold if verify and measured is not None else None
    off = "" if verify else " (pixel check off)"
    if override is not None:
        cosine = check_threshold(override)
        binary = binary_equivalent(cosine)
        if measured is not None:
            binary = min(binary, measured.binary_threshold.threshold)
        source = f"--threshold {cosine:g}" + (f"; pixel check {pixel.threshold:.4f}" if pixel else off)
        return CopyThresholds(cosine, binary, source, pixel.threshold if pixel else None)
    if measured is None:
        raise NoCopyThresholdError(missing)
    on_floats, on_codes = measured.float_threshold, measured.binary_threshold
    if pixel and measured.candidate_threshold and measured.candidate_binary_threshold:
        on_floats, on_codes = measured.candidate_threshold, measured.candidate_binary_threshold  # the check decides
    return CopyThresholds(
        on_floats.threshold, on_codes.threshold, measured.sentence() + off, pixel.threshold if pixel else None
    )

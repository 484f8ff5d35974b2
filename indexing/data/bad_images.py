"""Find unreadable images before a long job starts, so the user sees every bad path at once.

Training calls :func:`scan_images` and then skips or fails per ``--on-bad-image``. The scan
is cheaper than a full decode: ``verify()`` checks the container, then a reduced-size
decode (JPEG ``draft`` mode) reads the whole entropy-coded stream, which is where
truncation and corruption show up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image
from tqdm import tqdm

from retrieval.indexing.data.image_io import DEFAULT_MAX_PIXELS, check_pixel_limit, decode_failure_reason
from retrieval.indexing.data.records import ImageRecord

_SCAN_SIZE = (64, 64)


@dataclass(frozen=True)
class BadImageReport:
    """The result of a scan: how many images were checked and which ones failed, with why."""

    checked: int
    bad: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.bad

    @property
    def bad_paths(self) -> set[Path]:
        return {path for path, _ in self.bad}

    def summary(self, limit: int = 10) -> str:
        """One line per bad image (at most ``limit``), headed by the counts."""
        if self.ok:
            return f"all {self.checked} images are readable"
        lines = [f"{len(self.bad)} of {self.checked} images cannot be read:"]
        lines += [f"  {path}: {reason}" for path, reason in self.bad[:limit]]
        if len(self.bad) > limit:
            lines.append(f"  ... and {len(self.bad) - limit} more")
        return "\n".join(lines)


def scan_images(
    records: Sequence[ImageRecord], *, progress: bool = True, max_pixels: int = DEFAULT_MAX_PIXELS
) -> BadImageReport:
    """Check that every record's image opens and decodes; never raises for a bad image."""
    bad: list[tuple[Path, str]] = []
    for record in tqdm(records, desc="checking images", unit="img", disable=not progress):
        reason = image_problem(record.path, max_pixels)
        if reason is not None:
            bad.append((record.path, reason))
    return BadImageReport(checked=len(records), bad=bad)


def image_problem(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> str | None:
    """Why ``path`` cannot be read as an image, or ``None`` if it can."""
    try:
        with Image.open(path) as image:
            check_pixel_limit(image.size, max_pixels)
            image.verify()
        with Image.open(path) as image:
            image.draft("RGB", _SCAN_SIZE)
            image.load()
    except Exception as error:  # noqa: BLE001 - any decoder failure means "bad image"
        return decode_failure_reason(error)
    return None

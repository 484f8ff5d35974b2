"""Find unreadable images before a long job starts, so the user sees every bad path at once.

Training calls :func:`scan_images` and then skips or fails per ``--on-bad-image``; it always leaves out the
images too small to see (``MIN_IMAGE_SIDE``), as ``retrieval data check`` says. The scan
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
MIN_IMAGE_SIDE = 32
"""Every backbone here downsamples 32x: an image with a side below 32 px holds less than one pixel of its last
stage's features, and resizing it up to the crop invents what it lacks (``retrieval train``'s crop has the same
floor, ``training.config.image_sizes.MIN_IMAGE_SIZE``)."""


@dataclass(frozen=True)
class BadImageReport:
    """The result of a scan: how many images were checked and which ones failed, with why."""

    checked: int
    bad: list[tuple[Path, str]] = field(default_factory=list)
    small: list[tuple[Path, tuple[int, int]]] = field(default_factory=list)  # readable, a side < MIN_IMAGE_SIDE

    @property
    def ok(self) -> bool:
        return not self.bad

    @property
    def bad_paths(self) -> set[Path]:
        return {path for path, _ in self.bad}

    def summary(self, limit: int = 10) -> str:
        """One line per bad image (at most ``limit``), headed by the counts; then the small ones, if any."""
        lines = [f"all {self.checked} images are readable"]
        if not self.ok:
            lines = [f"{len(self.bad)} of {self.checked} images cannot be read:"]
            lines += [f"  {path}: {reason}" for path, reason in self.bad[:limit]]
            lines += [f"  ... and {len(self.bad) - limit} more"] if len(self.bad) > limit else []
        if self.small:
            lines.append(self.small_sentence() + ":")
            lines += [f"  {path}: {width}x{height}" for path, (width, height) in self.small[:limit]]
            lines += [f"  ... and {len(self.small) - limit} more"] if len(self.small) > limit else []
        return "\n".join(lines)

    @property
    def small_paths(self) -> set[Path]:
        return {path for path, _ in self.small}

    def small_sentence(self) -> str:
        return (
            f"{len(self.small)} of {self.checked} images are smaller than {MIN_IMAGE_SIDE} px on a side, below what "
            f"the backbones can see (they downsample {MIN_IMAGE_SIDE}x), so training leaves them out; replace them "
            "with larger ones to use them"
        )


def scan_images(
    records: Sequence[ImageRecord], *, progress: bool = True, max_pixels: int = DEFAULT_MAX_PIXELS
) -> BadImageReport:
    """Check that every record's image opens and decodes; never raises for a bad image."""
    bad: list[tuple[Path, str]] = []
    small: list[tuple[Path, tuple[int, int]]] = []
    for record in tqdm(records, desc="checking images", unit="img", disable=not progress):
        reason, size = _scan(record.path, max_pixels)
        if reason is not None:
            bad.append((record.path, reason))
        elif size is not None and min(size) < MIN_IMAGE_SIDE:
            small.append((record.path, size))
    return BadImageReport(checked=len(records), bad=bad, small=small)


def _scan(path: Path, max_pixels: int) -> tuple[str | None, tuple[int, int] | None]:
    """Why ``path`` cannot be read (None: it can), and its size when it can."""
    try:
        with Image.open(path) as image:
            size = image.size
            check_pixel_limit(size, max_pixels)
            image.verify()
        with Image.open(path) as image:
            image.draft("RGB", _SCAN_SIZE)
            image.load()
    except Exception as error:  # noqa: BLE001 - any decoder failure means "bad image"
        return decode_failure_reason(error), None
    return None, (int(size[0]), int(size[1]))

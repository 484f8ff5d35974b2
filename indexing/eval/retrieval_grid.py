"""A PNG that shows retrieval at a glance: each row is a query, then its top-k results.

Results are framed green when they share the query's label and red when they do not.
Pillow only (no matplotlib figure state), so it is cheap and safe to call from a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw

from retrieval.indexing.common.atomic_write import atomic_write_with
from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.data.image_io import open_rgb

HIT = (40, 170, 60)
MISS = (215, 40, 40)
QUERY = (60, 60, 60)
BACKGROUND = (255, 255, 255)
FRAME = 4
GAP = 6
CAPTION = 14


@dataclass(frozen=True)
class GridRow:
    """One query and its ranked neighbours as (path, label) pairs."""

    query_path: Path
    query_label: str
    neighbors: Sequence[tuple[Path, str]]


def thumbnail(path: Path, size: int) -> Image.Image:
    """A ``size`` x ``size`` letterboxed thumbnail, or a grey tile for an unreadable file."""
    tile = Image.new("RGB", (size, size), (200, 200, 200))
    try:
        img = open_rgb(Path(path))
    except RetrievalError:
        return tile
    img.thumbnail((size, size))
    tile.paste(img, ((size - img.width) // 2, (size - img.height) // 2))
    return tile


def _framed(tile: Image.Image, colour: tuple[int, int, int], caption: str) -> Image.Image:
    size = tile.width + 2 * FRAME
    cell = Image.new("RGB", (size, size + CAPTION), BACKGROUND)
    cell.paste(Image.new("RGB", (size, size), colour), (0, 0))
    cell.paste(tile, (FRAME, FRAME))
    ImageDraw.Draw(cell).text((2, size + 1), caption[: max(4, size // 7)], fill=(0, 0, 0))
    return cell


def render_grid(rows: Sequence[GridRow], thumb: int = 96) -> Image.Image:
    """The whole grid as one RGB image; the query sits in the first column, framed dark grey."""
    columns = 1 + max((len(row.neighbors) for row in rows), default=0)
    cell_w, cell_h = thumb + 2 * FRAME, thumb + 2 * FRAME + CAPTION
    canvas = Image.new("RGB", (columns * (cell_w + GAP) + GAP, len(rows) * (cell_h + GAP) + GAP), BACKGROUND)
    for r, row in enumerate(rows):
        y = GAP + r * (cell_h + GAP)
        canvas.paste(_framed(thumbnail(row.query_path, thumb), QUERY, f"Q {row.query_label}"), (GAP, y))
        for c, (path, label) in enumerate(row.neighbors, start=1):
            colour = HIT if label == row.query_label else MISS
            canvas.paste(_framed(thumbnail(path, thumb), colour, f"{c}. {label}"), (GAP + c * (cell_w + GAP), y))
    return canvas


def save_grid(rows: Sequence[GridRow], out_path: Path, thumb: int = 96) -> Path:
    """Render and write the grid atomically as PNG."""
    image = render_grid(rows, thumb)
    atomic_write_with(Path(out_path), lambda tmp: image.save(tmp, format="PNG"))
    return Path(out_path)

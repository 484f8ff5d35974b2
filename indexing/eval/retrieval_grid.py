"""A PNG that shows retrieval at a glance: each row is a query, then its top-k results.

Results are framed green when they share the query's label and red when they do not; each cell
shows the rank and score above the full label, wrapped to the cell width; a legend at the bottom
says what the frames and scores mean. Pillow only (no matplotlib figure state), so it is cheap
and safe to call from a server.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont, ImageOps

from retrieval.indexing.common.atomic_write import atomic_write_with
from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.data.image_io import open_rgb

RGB = tuple[int, int, int]
HIT = (40, 170, 60)
MISS = (215, 40, 40)
QUERY = (60, 60, 60)
BACKGROUND = (255, 255, 255)
TEXT = (0, 0, 0)
FRAME = 4
GAP = 6
FONT_PX = 11
LINE = FONT_PX + 4
MAX_LABEL_LINES = 6  # a guard against pathological labels; class names fit in far fewer
SCORE_NAME = "score: cosine similarity (higher is closer)"
_BREAK_AFTER = re.compile(r"[^ _\-/.]*[ _\-/.]|[^ _\-/.]+")  # pieces ending where a label may wrap
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@dataclass(frozen=True)
class GridRow:
    """One query and its ranked neighbours as (path, label) pairs, with their scores when known."""

    query_path: Path
    query_label: str
    neighbors: Sequence[tuple[Path, str]]
    scores: Sequence[float] = field(default_factory=tuple)
    query_caption: str = "query"  # what the first cell is (duplicates.png: the first image of a pair of copies)


def font() -> Font:
    return ImageFont.load_default(size=FONT_PX)


def wrap_label(text: str, width: int, face: Font) -> list[str]:
    """``text`` in lines no wider than ``width`` px, broken after spaces, ``_``, ``-``, ``/`` or ``.``
    where possible and anywhere inside a longer piece; joined back, the lines give ``text``."""
    lines = [""]
    for piece in _BREAK_AFTER.findall(text):
        if face.getlength(lines[-1] + piece) <= width:
            lines[-1] += piece
            continue
        if lines[-1]:
            lines.append("")
        for char in piece:
            if lines[-1] and face.getlength(lines[-1] + char) > width:
                lines.append("")
            lines[-1] += char
    return lines if text else []


def thumbnail(path: Path, size: int) -> Image.Image:
    """The image scaled to fill a ``size`` x ``size`` tile (up or down, aspect kept, letterboxed), or a grey
    tile for an unreadable file: a 32 px image fills its tile as a 500 px one does, never a speck."""
    tile = Image.new("RGB", (size, size), (200, 200, 200))
    try:
        img = open_rgb(Path(path))
    except RetrievalError:
        return tile
    img = ImageOps.contain(img, (size, size), Image.Resampling.BICUBIC)
    tile.paste(img, ((size - img.width) // 2, (size - img.height) // 2))
    return tile


def _caption(head: str, label: str, width: int, face: Font) -> list[str]:
    lines = wrap_label(label, width, face)
    if len(lines) > MAX_LABEL_LINES:
        lines = [*lines[: MAX_LABEL_LINES - 1], lines[MAX_LABEL_LINES - 1][:-1] + "…"]
    return [head, *lines]


def _framed(tile: Image.Image, colour: RGB, caption: list[str], height: int, face: Font) -> Image.Image:
    size = tile.width + 2 * FRAME
    cell = Image.new("RGB", (size, height), BACKGROUND)
    cell.paste(Image.new("RGB", (size, size), colour), (0, 0))
    cell.paste(tile, (FRAME, FRAME))
    draw = ImageDraw.Draw(cell)
    for n, line in enumerate(caption):
        draw.text((2, size + 2 + n * LINE), line, fill=TEXT, font=face)
    return cell


def _legend_layout(
    width: int, face: Font, scores: bool, first: str = "query"
) -> list[tuple[int, int, RGB | None, str]]:
    """(x, y, swatch colour, text) of each legend entry, flowing onto new lines within ``width``; ``first``
    names the first column's cells."""
    items: list[tuple[RGB | None, str]] = [
        (QUERY, first),
        (HIT, "same label as the query"),
        (MISS, "different label"),
    ]
    items += [(None, SCORE_NAME)] if scores else []
    placed: list[tuple[int, int, RGB | None, str]] = []
    x, y = GAP, 0
    for colour, text in items:
        entry = (LINE if colour else 0) + int(face.getlength(text)) + 3 * GAP
        if x > GAP and x + entry > width:
            x, y = GAP, y + LINE + 2
        placed.append((x, y, colour, text))
        x += entry
    return placed


def _draw_legend(canvas: Image.Image, top: int, layout: list[tuple[int, int, RGB | None, str]], face: Font) -> None:
    draw = ImageDraw.Draw(canvas)
    for x, y, colour, text in layout:
        if colour is not None:
            draw.rectangle((x, top + y + 2, x + LINE - 4, top + y + LINE - 2), fill=colour)
            x += LINE
        draw.text((x, top + y + 1), text, fill=TEXT, font=face)


def render_grid(rows: Sequence[GridRow], thumb: int = 96) -> Image.Image:
    """The whole grid as one RGB image; the query sits in the first column, framed dark grey."""
    face = font()
    columns = 1 + max((len(row.neighbors) for row in rows), default=0)
    cell_w = thumb + 2 * FRAME
    captions = [row_captions(row, cell_w - 4, face) for row in rows]
    cell_h = cell_w + 4 + LINE * max((len(c) for row in captions for c in row), default=1)
    width = columns * (cell_w + GAP) + GAP
    first = rows[0].query_caption if rows else "query"
    legend = _legend_layout(width, face, scores=any(row.scores for row in rows), first=first)
    grid_h = len(rows) * (cell_h + GAP) + GAP
    canvas = Image.new("RGB", (width, grid_h + legend[-1][1] + LINE + GAP), BACKGROUND)
    for r, (row, cell_captions) in enumerate(zip(rows, captions)):
        y = GAP + r * (cell_h + GAP)
        tiles = [(row.query_path, QUERY)]
        tiles += [(path, HIT if label == row.query_label else MISS) for path, label in row.neighbors]
        for c, ((path, colour), caption) in enumerate(zip(tiles, cell_captions)):
            cell = _framed(thumbnail(path, thumb), colour, caption, cell_h, face)
            canvas.paste(cell, (GAP + c * (cell_w + GAP), y))
    _draw_legend(canvas, grid_h, legend, face)
    return canvas


def row_captions(row: GridRow, width: int, face: Font) -> list[list[str]]:
    """Caption lines of the query cell, then of each neighbour: rank and score, then the label."""
    captions = [_caption(row.query_caption, row.query_label, width, face)]
    for rank, (_, label) in enumerate(row.neighbors, start=1):
        head = f"{rank}. {row.scores[rank - 1]:.3f}" if len(row.scores) >= rank else f"{rank}."
        captions.append(_caption(head, label, width, face))
    return captions


def save_grid(rows: Sequence[GridRow], out_path: Path, thumb: int = 96) -> Path:
    """Render and write the grid atomically as PNG."""
    image = render_grid(rows, thumb)
    atomic_write_with(Path(out_path), lambda tmp: image.save(tmp, format="PNG"))
    return Path(out_path)

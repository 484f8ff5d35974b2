"""Draw one synthetic image: a textured, coloured shape on a cluttered, noisy background.

Within a class everything but the concept varies: rotation, scale, position, background
gradient, distractor blobs, colour jitter and pixel noise. Drawing uses Pillow polygons on
a 4x supersampled mask and NumPy array maths, with no per-pixel Python loops.
"""

from __future__ import annotations

import colorsys

import numpy as np
from PIL import Image, ImageDraw

from retrieval.indexing.data.synth.concepts import COLOURS, Concept
from retrieval.indexing.data.synth.shapes import SHAPES, place
from retrieval.indexing.data.synth.textures import TEXTURES

SUPERSAMPLE = 4
SHADE = 0.3  # the texture's second colour: the class colour darkened to 30 %


def render_image(concept: Concept, size: int, rng: np.random.Generator) -> np.ndarray:
    """An ``size x size x 3`` uint8 image of ``concept``; all randomness comes from ``rng``."""
    canvas = _background(size, rng)
    _draw_clutter(canvas, rng)
    radius = size * rng.uniform(0.24, 0.36)
    centre = tuple(rng.uniform(radius + 1, size - radius - 1, size=2))
    angle = rng.uniform(0, 2 * np.pi)
    alpha = _shape_mask(concept.shape, size, centre, radius, angle)
    colour = _surface(concept, size, centre, radius, angle, rng)
    image = np.asarray(canvas, dtype=np.float32)
    image = image * (1 - alpha[..., None]) + colour * alpha[..., None]
    image += rng.standard_normal(image.shape, dtype=np.float32) * np.float32(rng.uniform(2.0, 8.0))
    return np.clip(image, 0, 255).round().astype(np.uint8)


def _hsv(hue: float, saturation: float, value: float) -> np.ndarray:
    return np.array(colorsys.hsv_to_rgb(hue % 1.0, saturation, value), dtype=np.float32) * 255


def _background(size: int, rng: np.random.Generator) -> Image.Image:
    """A linear gradient between two low-saturation colours, in a random direction."""
    start, end = (_hsv(rng.uniform(), rng.uniform(0, 0.25), rng.uniform(0.35, 0.95)) for _ in range(2))
    angle = rng.uniform(0, 2 * np.pi)
    axis = np.linspace(-0.5, 0.5, size, dtype=np.float32)
    t = np.clip(np.cos(angle) * axis[None, :] + np.sin(angle) * axis[:, None] + 0.5, 0, 1)
    pixels = start * (1 - t[..., None]) + end * t[..., None]
    return Image.fromarray(pixels.round().astype(np.uint8))


def _draw_clutter(canvas: Image.Image, rng: np.random.Generator) -> None:
    """A few small random blobs behind the shape, in any colour."""
    draw = ImageDraw.Draw(canvas)
    size = canvas.size[0]
    for _ in range(rng.integers(2, 6)):
        cx, cy = rng.uniform(0, size, size=2)
        rx, ry = size * rng.uniform(0.03, 0.08, size=2)
        fill = _hsv(rng.uniform(), rng.uniform(0.2, 0.9), rng.uniform(0.3, 1.0)).round().astype(int)
        draw.ellipse((cx - rx, cy - ry, cx + rx, cy + ry), fill=tuple(fill.tolist()))


def _shape_mask(shape: str, size: int, centre: tuple[float, float], radius: float, angle: float) -> np.ndarray:
    """Anti-aliased coverage in [0, 1] of the shape at pixel resolution."""
    big = size * SUPERSAMPLE
    mask = Image.new("L", (big, big), 0)
    draw = ImageDraw.Draw(mask)
    scaled_centre = (centre[0] * SUPERSAMPLE, centre[1] * SUPERSAMPLE)
    for points, fill in SHAPES[shape]:
        draw.polygon(place(points, scaled_centre, radius * SUPERSAMPLE, angle), fill=fill)
    small = mask.reduce(SUPERSAMPLE)
    return np.asarray(small, dtype=np.float32) / 255.0


def _surface(
    concept: Concept, size: int, centre: tuple[float, float], radius: float, angle: float, rng: np.random.Generator
) -> np.ndarray:
    """Per-pixel colour of the shape: the jittered class colour patterned by the texture."""
    hue = COLOURS[concept.colour] / 360 + rng.uniform(-0.02, 0.02)
    base = _hsv(hue, rng.uniform(0.75, 1.0), rng.uniform(0.8, 1.0))
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    dx, dy = (xs - centre[0]) / radius, (ys - centre[1]) / radius
    u = dx * np.cos(angle) + dy * np.sin(angle)
    v = -dx * np.sin(angle) + dy * np.cos(angle)
    weight = TEXTURES[concept.texture](u, v, rng.uniform(0.85, 1.15), rng.uniform())
    weight = weight.astype(np.float32)[..., None]
    return base * weight + base * SHADE * (1 - weight)

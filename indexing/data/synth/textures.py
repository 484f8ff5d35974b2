"""The surface textures of the synthetic dataset, as weight maps over the shape's own frame.

A texture maps the shape-local coordinates ``u, v`` (unit = shape radius, rotating with
the shape) to a weight in [0, 1]: 1 shows the class colour, 0 its dark shade. ``scale``
and ``phase`` jitter the pattern per image so no two images share exact pixels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Texture = Callable[[np.ndarray, np.ndarray, float, float], np.ndarray]
_PERIOD = 0.55  # pattern period in shape radii: 3-4 repeats across a shape


def _square_wave(x: np.ndarray, duty: float = 0.5) -> np.ndarray:
    return ((x % 1.0) < duty).astype(np.float32)


def solid(u: np.ndarray, v: np.ndarray, scale: float, phase: float) -> np.ndarray:
    return np.ones_like(u)


def stripes(u: np.ndarray, v: np.ndarray, scale: float, phase: float) -> np.ndarray:
    return _square_wave(u / (_PERIOD * scale) + phase)


def dots(u: np.ndarray, v: np.ndarray, scale: float, phase: float) -> np.ndarray:
    period = _PERIOD * scale
    du = (u / period + phase) % 1.0 - 0.5
    dv = (v / period + phase) % 1.0 - 0.5
    return (du**2 + dv**2 > 0.28**2).astype(np.float32)


def checker(u: np.ndarray, v: np.ndarray, scale: float, phase: float) -> np.ndarray:
    period = _PERIOD * scale * 1.2
    return (np.floor(u / period + phase) + np.floor(v / period + phase)) % 2


def grid(u: np.ndarray, v: np.ndarray, scale: float, phase: float) -> np.ndarray:
    lines_u = _square_wave(u / (_PERIOD * scale) + phase, 0.28)
    lines_v = _square_wave(v / (_PERIOD * scale) + phase, 0.28)
    return 1.0 - np.maximum(lines_u, lines_v)


def gradient(u: np.ndarray, v: np.ndarray, scale: float, phase: float) -> np.ndarray:
    return np.clip((u + 1.0) / 2.0, 0.0, 1.0)


TEXTURES: dict[str, Texture] = {
    "solid": solid,
    "stripes": stripes,
    "dots": dots,
    "checker": checker,
    "grid": grid,
    "gradient": gradient,
}

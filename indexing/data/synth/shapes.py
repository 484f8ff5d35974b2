"""The shapes of the synthetic dataset, as polygons in a unit frame (radius about 1).

A shape is a list of ``(points, fill)`` layers drawn in order: ``fill=255`` adds area,
``fill=0`` cuts it away again (the hole of a ring, the bite of a crescent).
"""

from __future__ import annotations

import numpy as np

Layer = tuple[np.ndarray, int]


def _regular(corners: int, radius: float = 1.0, phase: float = -np.pi / 2) -> np.ndarray:
    angles = phase + np.arange(corners) * 2 * np.pi / corners
    return radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def _star(points: int = 5, inner: float = 0.42) -> np.ndarray:
    radii = np.where(np.arange(2 * points) % 2 == 0, 1.0, inner)
    angles = -np.pi / 2 + np.arange(2 * points) * np.pi / points
    return radii[:, None] * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def _heart(samples: int = 48) -> np.ndarray:
    t = np.linspace(0, 2 * np.pi, samples, endpoint=False)
    x = 16 * np.sin(t) ** 3
    y = -(13 * np.cos(t) - 5 * np.cos(2 * t) - 2 * np.cos(3 * t) - np.cos(4 * t))
    return np.stack([x, y + 2.5], axis=1) / 16.5


_CROSS = np.array(
    [
        (-0.3, -1),
        (0.3, -1),
        (0.3, -0.3),
        (1, -0.3),
        (1, 0.3),
        (0.3, 0.3),
        (0.3, 1),
        (-0.3, 1),
        (-0.3, 0.3),
        (-1, 0.3),
        (-1, -0.3),
        (-0.3, -0.3),
    ],
    dtype=float,
)
_ARROW = np.array(
    [(-1, -0.25), (0.15, -0.25), (0.15, -0.7), (1, 0), (0.15, 0.7), (0.15, 0.25), (-1, 0.25)], dtype=float
)

SHAPES: dict[str, list[Layer]] = {
    "circle": [(_regular(48), 255)],
    "square": [(_regular(4, 1.0, np.pi / 4), 255)],
    "triangle": [(_regular(3, 1.0) + (0, 0.2), 255)],
    "star": [(_star(), 255)],
    "cross": [(_CROSS * 0.9, 255)],
    "ring": [(_regular(48), 255), (_regular(48, 0.55), 0)],
    "hexagon": [(_regular(6, 1.0, 0.0), 255)],
    "crescent": [(_regular(48), 255), (_regular(48, 0.85) + (0.5, -0.15), 0)],
    "arrow": [(_ARROW, 255)],
    "heart": [(_heart(), 255)],
}


def place(points: np.ndarray, centre: tuple[float, float], radius: float, angle: float) -> list[tuple[float, float]]:
    """Rotate by ``angle``, scale by ``radius`` and move to ``centre`` (pixel coordinates)."""
    cos, sin = np.cos(angle), np.sin(angle)
    rotated = points @ np.array([[cos, sin], [-sin, cos]])
    moved = rotated * radius + np.asarray(centre)
    return [tuple(point) for point in moved.tolist()]

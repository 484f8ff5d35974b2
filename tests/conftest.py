"""Shared fixtures: a small generated dataset (the project's built-in default data)."""

from __future__ import annotations

from pathlib import Path

import pytest

# Fixture modules shared by many test files (tmp models, galleries, index templates).
pytest_plugins = ["browser_fixtures", "index_fixtures", "serving_fixtures", "text_fixtures"]

SHARED = Path(__file__).resolve().parents[2] / "shared"
CARS196 = SHARED / "data" / "cars196"
CUB50 = SHARED / "data" / "cub50"


@pytest.fixture(scope="session")
def synth_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 classes x 12 images of 32 px: 12 train classes (3 of them validate), 12 test classes."""
    from retrieval.indexing.data.synth.generator import generate_synthetic_dataset

    out = tmp_path_factory.mktemp("synth") / "data"
    generate_synthetic_dataset(out, classes=24, per_class=12, size=32, seed=0, progress=False)
    return out


@pytest.fixture(scope="session")
def cars196_dir() -> Path:
    """Stanford Cars-196 (train split, cropped; ../shared/data/cars196/SOURCE.md), as CI has it."""
    if not CARS196.is_dir():
        pytest.skip("../shared/data/cars196 is not present")
    return CARS196


@pytest.fixture(scope="session")
def cub50_dir() -> Path:
    """The first 50 classes of CUB-200-2011 (../shared/data/cub50/SOURCE.md), as CI has it."""
    if not CUB50.is_dir():
        pytest.skip("../shared/data/cub50 is not present")
    return CUB50

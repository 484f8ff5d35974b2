"""The source folders install as ``retrieval`` (api/) and ``retrieval.*`` only, and every sub-package is declared."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "api": "retrieval",
    "training": "retrieval.training",
    "indexing": "retrieval.indexing",
    "serving": "retrieval.serving",
    "cli": "retrieval.cli",
}


def _declared_packages() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def test_every_source_package_is_declared() -> None:
    found = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *relative)))
    assert found == _declared_packages()


@pytest.mark.slow
def test_wheel_holds_only_the_retrieval_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("retrieval-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top_levels = {name.split("/")[0] for name in names if not name.startswith("retrieval-")}
    assert top_levels == {"retrieval"}
    assert "retrieval/serving/static/index.html" in names
    assert "retrieval/cli/main.py" in names and "retrieval/pipeline.py" in names
    assert "retrieval/__init__.py" in names  # the flat API's root (api/), lazy: importing it loads nothing

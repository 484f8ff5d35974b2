"""docs/CONTRACTS.md's walks of one ``POST /search`` and of one ``retrieval train`` still name the files they
go through: each step's file exists, is named once, and holds the first name the step gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STEP = re.compile(r"^(\d+)\. `([^`]+\.py)`: `([^`]+)`", re.MULTILINE)


WALKS = {  # section title -> files the walk must visit, in this order
    "## A walk of one HTTP search": (
        "serving/routes/routes_search.py",
        "serving/query_pipeline.py",
        "indexing/usecases/searching.py",
        "indexing/query/chain.py",
    ),
    "## A walk of one `retrieval train`": (
        "cli/commands/train_commands.py",
        "training/usecases.py",
        "training/run/fitting/final_fit.py",
        "training/run/fitting/trainer.py",
    ),
}


def walk_steps(title: str = "## A walk of one HTTP search") -> list[tuple[int, str, str]]:
    text = (ROOT / "docs" / "CONTRACTS.md").read_text(encoding="utf-8")
    section = text.split(title, 1)[1].split("\n## ", 1)[0]
    return [(int(number), path, name) for number, path, name in STEP.findall(section)]


@pytest.mark.parametrize("title", list(WALKS))
def test_the_walk_names_each_existing_file_once_in_order(title: str) -> None:
    steps = walk_steps(title)
    assert [number for number, _, _ in steps] == list(range(1, len(steps) + 1))
    paths = [path for _, path, _ in steps]
    assert len(set(paths)) == len(paths), "a file named twice"
    assert [path for path in paths if not (ROOT / path).is_file()] == []
    visits = [paths.index(entry) for entry in WALKS[title]]  # a missing entry is a ValueError
    assert visits == sorted(visits), f"out of order: {WALKS[title]}"


@pytest.mark.parametrize("title", list(WALKS))
def test_each_step_names_something_its_file_defines(title: str) -> None:
    for _, path, name in walk_steps(title):
        last = re.split(r"[.(]", name.split(" ")[0])
        word = last[1] if len(last) > 1 and last[1] else last[0]
        defined = re.search(rf"(def|class) {re.escape(word)}\b|^{re.escape(word)}\b", (ROOT / path).read_text(), re.M)
        assert defined, f"{path} defines no {word!r} ({name})"

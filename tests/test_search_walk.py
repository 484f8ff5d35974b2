"""docs/CONTRACTS.md's walk of one ``POST /search`` still names the files the search goes through: each
step's file exists, is named once, and holds the first name the step gives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP = re.compile(r"^(\d+)\. `([^`]+\.py)`: `([^`]+)`", re.MULTILINE)


def walk_steps() -> list[tuple[int, str, str]]:
    text = (ROOT / "docs" / "CONTRACTS.md").read_text(encoding="utf-8")
    section = text.split("## A walk of one HTTP search", 1)[1].split("\n## ", 1)[0]
    return [(int(number), path, name) for number, path, name in STEP.findall(section)]


def test_the_walk_names_each_existing_file_once_in_order() -> None:
    steps = walk_steps()
    assert [number for number, _, _ in steps] == list(range(1, len(steps) + 1))
    paths = [path for _, path, _ in steps]
    assert len(set(paths)) == len(paths), "a file named twice"
    assert [path for path in paths if not (ROOT / path).is_file()] == []
    for entry in ("serving/routes/routes_search.py", "serving/query_pipeline.py", "indexing/store/item_search.py"):
        assert entry in paths
    assert paths.index("serving/query_pipeline.py") < paths.index("indexing/store/item_search.py")


def test_each_step_names_something_its_file_defines() -> None:
    for _, path, name in walk_steps():
        last = re.split(r"[.(]", name.split(" ")[0])
        word = last[1] if len(last) > 1 and last[1] else last[0]
        defined = re.search(rf"(def|class) {re.escape(word)}\b|^{re.escape(word)}\b", (ROOT / path).read_text(), re.M)
        assert defined, f"{path} defines no {word!r} ({name})"

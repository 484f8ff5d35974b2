"""The shape of the code by feature, read with ``ast`` (#55): one route function serves ``POST /search``;
no public class is defined twice; the doors (``cli/commands``, ``serving/routes``) import nothing from
``indexing/store``, ``training/run`` or ``training/export``; no door function is over 60 lines; duplicates,
text and probability each live in at most 3 folders outside the doors (plus one module on the torch side).
The module-to-folder cycle check is in tests/test_package_layout.py."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ("api", "cli", "indexing", "serving", "training")
DOORS = ("cli/commands", "serving/routes")
BELOW_THE_USE_CASES = ("retrieval.indexing.store", "retrieval.training.run", "retrieval.training.export")
DOOR_IMPORTS_LEFT: dict[str, tuple[str, str]] = {
    # door module -> the module below the use cases it still imports, and why (none left)
}
MAX_DOOR_FUNCTION_LINES = 60
FEATURES = {
    # feature -> the words that mark its modules (file or folder names)
    "duplicates": ("duplicate", "copy_", "copies", "pixel_hash"),
    "text": ("text_", "text/"),
    "probability": ("probabilit", "score_calibration", "reliability"),
}
MAX_FEATURE_FOLDERS = 3
MAX_TORCH_SIDE_MODULES = {"duplicates": 1, "probability": 2, "text": 7}
"""Modules of a feature under ``training/`` (what needs torch); text and probability are not yet down to one."""


def _product_files() -> Iterator[Path]:
    for folder in SOURCE_FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _is_door(path: Path) -> bool:
    return _relative(path).startswith(DOORS)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _imported_modules(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_one_route_function_serves_post_search() -> None:
    serving = [path for path in _product_files() if _relative(path).startswith("serving/")]
    found = [
        f"{_relative(path)}:{node.name}"
        for path in serving
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for decorator in node.decorator_list
        if isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Attribute)
        and decorator.func.attr == "post"
        and decorator.args
        and isinstance(decorator.args[0], ast.Constant)
        and decorator.args[0].value == "/search"
    ]
    assert found == ["serving/routes/routes_search.py:search"]


def test_no_public_class_is_defined_twice() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for path in _product_files():
        for node in _tree(path).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                homes[node.name].append(_relative(path))
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}


def test_no_door_imports_below_the_use_cases() -> None:
    wrong = []
    for path in filter(_is_door, _product_files()):
        allowed = DOOR_IMPORTS_LEFT.get(_relative(path), ("", ""))[0]
        for module in _imported_modules(_tree(path)):
            if module.startswith(BELOW_THE_USE_CASES) and module != allowed:
                wrong.append(f"{_relative(path)} imports {module}")
    assert wrong == []


def test_no_door_function_is_over_the_limit() -> None:
    long = {}
    for path in filter(_is_door, _product_files()):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_DOOR_FUNCTION_LINES:
                    long[(_relative(path), node.name)] = lines
    assert long == {}


def _feature_modules(feature: str) -> list[str]:
    words = FEATURES[feature]
    return [
        name
        for path in _product_files()
        if not _is_door(path) and any(word in (name := _relative(path)) for word in words)
    ]


def test_each_feature_lives_in_few_folders() -> None:
    for feature in FEATURES:
        modules = _feature_modules(feature)
        torch_free = {str(Path(name).parent) for name in modules if not name.startswith("training/")}
        torch_side = [name for name in modules if name.startswith("training/")]
        assert len(torch_free) <= MAX_FEATURE_FOLDERS, (feature, sorted(torch_free))
        assert len(torch_side) <= MAX_TORCH_SIDE_MODULES[feature], (feature, torch_side)


def test_the_feature_count_sees_the_features() -> None:
    assert "indexing/duplicates/copy_join.py" in _feature_modules("duplicates")
    assert "indexing/query/steps/probability.py" in _feature_modules("probability")
    assert "training/export/text_export.py" in _feature_modules("text")

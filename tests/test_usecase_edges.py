"""The doors (the CLI's commands, the service's routes and its query pipeline, the flat Python API) call each
use case through its one function in the use-case layer, never the layers below it for a use case that
layer has. ``USE_CASES`` lists, per use case, its function and the functions below it that only it may
call; ``DOOR_EDGES`` the door -> use-case edges, read from the code (module-level and lazy imports)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOOR_FOLDERS = {"cli": "retrieval.cli", "serving": "retrieval.serving", "api": "retrieval"}

USE_CASES: dict[str, tuple[str, dict[str, set[str]]]] = {
    # use case: (its function, {module below the use-case layer: the names only the use case calls})
    "train": (
        "retrieval.training.usecases.run_train",
        {
            "retrieval.training.run.fitting.final_fit": {"fit_run"},
            "retrieval.training.ensemble.ensemble_training": {"train_ensemble", "resolve_ensemble"},
            "retrieval.training.run.outputs.run_dir": {"claim_run_dir"},
        },
    ),
    "eval": (
        "retrieval.indexing.usecases.evaluating.run_eval",
        {"retrieval.indexing.eval.evaluation": {"evaluate_index", "evaluate_model"}},
    ),
    "search": (
        "retrieval.indexing.usecases.searching.search_store",
        {"retrieval.indexing.query.chain": {"ranked_pages", "similar_pages"}},
    ),
    "add items": (
        "retrieval.indexing.usecases.updating.add_embedded",
        {"retrieval.indexing.store.shared.store_checks": {"check_keys_free"}},
    ),
}

DOOR_EDGES = {
    # door module -> the use-case functions it calls (through ``usecases as api`` or by name)
    "retrieval.cli.commands.train_commands": {"run_train"},
    "retrieval.cli.commands.eval_commands": {"run_eval"},
    "retrieval.cli.commands.search_commands": {"search_index"},
    "retrieval.serving.query_pipeline": {"search_store", "search_vectors"},
    "retrieval.serving.routes.routes_items": {"add_embedded", "check_new_keys"},
}


def _door_modules() -> dict[str, Path]:
    modules = {}
    for folder, package in DOOR_FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            modules[".".join((package, *parts)).removesuffix(".__init__")] = path
    return modules


def _imported_names(path: Path) -> set[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in the file, inside functions too."""
    tree = ast.parse(path.read_text())
    return {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def _called_names(path: Path) -> set[str]:
    """The names the file uses as ``name`` or ``something.name``."""
    tree = ast.parse(path.read_text())
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
        node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
    }


def test_no_door_calls_below_the_use_case_layer() -> None:
    below = {
        (module, name): case
        for case, (_, owned) in USE_CASES.items()
        for module, names in owned.items()
        for name in names
    }
    found = [
        f"{door} imports {module}.{name}: call {USE_CASES[below[(module, name)]][0]} instead"
        for door, path in _door_modules().items()
        for module, name in sorted(_imported_names(path))
        if (module, name) in below
    ]
    assert not found, "\n".join(found)


def test_each_door_calls_its_use_cases() -> None:
    modules = _door_modules()
    for door, functions in DOOR_EDGES.items():
        missing = functions - _called_names(modules[door])
        assert not missing, f"{door} no longer calls {', '.join(sorted(missing))}"


def test_the_use_case_functions_exist() -> None:
    import importlib

    for function, _ in USE_CASES.values():
        module, name = function.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name)), function

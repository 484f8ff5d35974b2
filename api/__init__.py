"""``retrieval``: the whole pipeline as one flat import, for notebooks and scripts (docs/python.md).

    from retrieval import train, export, build_index, search, evaluate
    run = train("photos/", "runs/first", epochs=0, backbone="efficientnet_lite0", pretrained="imagenet")
    export(run.run_dir)
    build_index(run.run_dir, "photos/", "index/")
    hits = search("index/", "query.jpg", k=5)      # per image: [Hit(item, score), ...]

This package is the repository's ``api/`` folder (pyproject.toml's package-dir); ``training``,
``indexing``, ``serving`` and ``cli`` are its sub-packages from their own folders. Its names resolve
lazily (PEP 562): ``import retrieval``, which every ``import retrieval.X`` runs first, loads nothing,
and a name loads its own module only when it is first used. ``pipeline`` holds the functions:
``build_index``, ``search``, ``evaluate`` and ``embed`` need no torch; ``train``, ``export``, ``study``,
``train_ensemble`` and ``config`` import torch when they are called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval.pipeline import (
        Hit,
        Item,
        add,
        build_index,
        config,
        data_duplicates,
        embed,
        evaluate,
        export,
        find_index_duplicates,
        remove,
        search,
        study,
        train,
        train_ensemble,
    )

__all__ = [
    "Hit",
    "Item",
    "add",
    "build_index",
    "config",
    "embed",
    "evaluate",
    "export",
    "remove",
    "search",
    "study",
    "train",
    "train_ensemble",
]
__all__ += ["data_duplicates", "find_index_duplicates"]
_HOMES = dict.fromkeys(__all__, "retrieval.pipeline")  # name -> the module that defines it


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'retrieval' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

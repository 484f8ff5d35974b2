"""The functions of the flat import ``from retrieval import ...``, one per stage of the command line.

``build_index``, ``search``, ``add`` (items by their vectors), ``evaluate`` and ``embed`` are ``retrieval.indexing.usecases``'s (no torch).
``train``, ``export``, ``study``, ``train_ensemble`` and ``config`` are ``retrieval.training.usecases``'s, defined
there once: here each is a ``TorchFunction`` that imports that module (and so torch) only when it is called
or its signature is read, so a notebook that only searches an index never loads torch. Each returns a typed
result: ``TrainedRun``, ``ExportResult``, ``BuildReport``, per image a list of ``Hit(item, score)``,
``EvaluationReport``, ``EmbeddingTable``. The names are listed once, in ``api/__init__.py``'s ``__all__``; here each
is re-exported by name (``import X as X``).
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any

from retrieval.indexing.store.shared.items.items_db import Hit as Hit
from retrieval.indexing.store.shared.items.items_db import Item as Item
from retrieval.indexing.usecases import add as add
from retrieval.indexing.usecases import build_index as build_index
from retrieval.indexing.usecases import embed as embed
from retrieval.indexing.usecases import evaluate as evaluate
from retrieval.indexing.usecases import find_index_duplicates as find_index_duplicates
from retrieval.indexing.usecases import remove as remove
from retrieval.indexing.usecases import search as search

TRAINING_API = "retrieval.training.usecases"
"""The module that defines the functions that need torch."""


class TorchFunction:
    """A function of ``retrieval.training.usecases`` under the same name, imported when first called: its
    signature and docstring are that function's (read from it on demand, which imports it too)."""

    def __init__(self, name: str) -> None:
        self.__name__ = self.__qualname__ = name
        self.__module__ = TRAINING_API

    @property
    def function(self) -> Any:
        return getattr(importlib.import_module(TRAINING_API), self.__name__)  # torch loads here

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.function)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self.function.__doc__

    def __repr__(self) -> str:
        return f"<function {TRAINING_API}.{self.__name__}, imported with torch when called>"


if TYPE_CHECKING:  # the type checker sees the one definition
    from retrieval.training.usecases import config as config
    from retrieval.training.usecases import data_duplicates as data_duplicates
    from retrieval.training.usecases import export as export
    from retrieval.training.usecases import study as study
    from retrieval.training.usecases import train as train
    from retrieval.training.usecases import train_ensemble as train_ensemble
else:
    config, data_duplicates, export, study, train, train_ensemble = (
        TorchFunction(name) for name in ("config", "data_duplicates", "export", "study", "train", "train_ensemble")
    )

"""The Python API: the command line's stages as functions, for notebooks and scripts (docs/python.md).

    from retrieval.training import api
    cfg = api.config("normsoftmax", data={"path": "data/"}, trainer={"epochs": 4})
    run = api.train(cfg, "runs/ns")            # -> TrainResult (run_dir, best_epoch, test metrics)
    api.export(run.run_dir)                     # -> ExportResult (runs/ns/export: model.onnx + model.json)
    api.build_index(run.run_dir, "data/", "index/", split="test")
    hits = api.search("index/", ["query.jpg"], k=5)   # per image: [(Item, score), ...]
    report = api.evaluate(index="index/")       # -> EvaluationReport (.metrics["float"].map_at_r)
    table = api.embed("runs/ns", "data/")       # -> EmbeddingTable (ids, paths, labels, embeddings)
    api.train_ensemble(cfg, "runs/ens", members=3)        # retrieval train --ensemble 3
    api.study("data/", ["normalized_softmax", "multi_similarity"], "study/", trials=4)  # retrieval study

Each function is a thin call of the implementation the matching command uses (``Trainer``,
``export_run``, ``indexing.store.builder.build_index``, ``item_search.ranked_hits``,
``indexing.eval.evaluation``, ``embedding_files.embedding_table``, ``train_ensemble``, ``run_study``), so the API and the CLI cannot drift apart. It lives in
``retrieval.training`` because it spans training (torch) and indexing, the one direction
``training -> indexing`` allows. Errors are the same one-sentence ``RetrievalError``s.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image

from retrieval.indexing.common.errors import ConfigError, DataError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.eval.evaluation import EvaluationReport, evaluate_index, evaluate_model
from retrieval.indexing.model.embedding_files import EmbeddingTable, embedding_table
from retrieval.indexing.model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.model.resolution import resolve_export_dir, resolve_query_model
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.store.build import builder
from retrieval.indexing.store.item_search import Hit, ranked_hits
from retrieval.indexing.store.shared.item_filter import parse_filter
from retrieval.indexing.store.shared.manifest import load_index_manifest
from retrieval.indexing.store.stored_embeddings import stored_embedding_table
from retrieval.training.config import TrainConfig, build_config
from retrieval.training.ensemble import EnsembleResult, EnsembleSpec, resolve_ensemble
from retrieval.training.ensemble import train_ensemble as _train_ensemble
from retrieval.training.export import ExportResult, export_run
from retrieval.training.int8_export import Int8Request
from retrieval.training.recipes import recipe as recipe_layer
from retrieval.training.run_dir import claim_run_dir
from retrieval.training.study.runner import StudyOutcome, run_study
from retrieval.training.study.state import StudySpec
from retrieval.training.trainer import Trainer, TrainResult

PathLike = str | Path
ImageLike = PathLike | Image.Image
Data = PathLike | Sequence[ImageRecord]
_EMBED_BATCH = 32

__all__ = ["build_index", "config", "embed", "evaluate", "export", "search", "study", "train", "train_ensemble"]


def config(recipe: str | None = None, **sections: Mapping[str, Any]) -> TrainConfig:
    """A validated ``TrainConfig``: a recipe's paper defaults (``retrieval train --recipe``), with the
    given sections on top, e.g. ``config("normsoftmax", data={"path": "data/"}, trainer={"epochs": 4})``.
    An unknown key or a bad value is a ConfigError naming it."""
    layers = [(f"recipe {recipe}", recipe_layer(recipe))] if recipe else []
    return build_config([*layers, ("arguments", {name: dict(values) for name, values in sections.items()})])


def train(
    cfg: TrainConfig, out: PathLike, *, resume: bool = False, overwrite: bool = False, progress: bool = True
) -> TrainResult:
    """Train into the run directory ``out`` as ``retrieval train`` does (an existing run needs
    ``resume`` or ``overwrite``); returns the run directory, the best epoch and the test metrics."""
    claim_run_dir(Path(out), resume=resume, overwrite=overwrite)
    return Trainer(cfg, Path(out), resume=resume, progress=progress).fit()


def train_ensemble(
    cfg: TrainConfig,
    out: PathLike,
    members: int | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> EnsembleResult | None:
    """``retrieval train --ensemble members``: ``members`` models with different seeds (and, with
    ``cfg.data.meta_classes``, each its own DREML class grouping) in ``out``; ``export`` then joins them into
    one ONNX model. ``resume`` continues an unfinished ensemble (``members`` may then be left out)."""
    claim_run_dir(Path(out), resume=resume, overwrite=overwrite)
    spec = resolve_ensemble(Path(out), members, resume=resume)
    if spec is None:
        raise ConfigError("train_ensemble() needs members (the number of models), or resume=True on an ensemble run")
    return _train_ensemble(cfg, Path(out), EnsembleSpec(members=spec.members), progress=progress)


def study(
    data: PathLike,
    losses: Sequence[str],
    out: PathLike,
    *,
    overwrite: bool = False,
    progress: bool = True,
    **options: Any,
) -> StudyOutcome:
    """``retrieval study``: the Reality Check protocol for ``losses`` on ``data``, written to ``out`` (study.md,
    study.csv, study.png) and continued where it stopped when ``out`` holds the same study. ``options`` are the
    command's, e.g. ``folds=4, trials=20, seeds=3, cached_features=True, epochs=4, overrides=["loss.lr=0.01"]``."""
    spec = StudySpec(data=str(data), losses=list(losses), **options)
    return run_study(spec, Path(out), overwrite=overwrite, progress=progress)


def export(
    run_dir: PathLike,
    out: PathLike | None = None,
    *,
    fp16: bool = False,
    quantize: Literal["int8"] | None = None,
    max_map_drop: float = 1.0,
    force: bool = False,
) -> ExportResult:
    """ONNX export of the run's best checkpoint to ``out`` (default ``run_dir/export``), parity-checked;
    ``quantize="int8"`` writes the INT8 model instead, if it loses at most ``max_map_drop`` points of
    validation MAP@R (``force`` writes it anyway)."""
    if quantize not in (None, "int8"):
        raise ConfigError(f"unknown quantize {quantize!r}; the one choice is 'int8'")
    int8 = Int8Request(max_map_drop=max_map_drop, force=force) if quantize == "int8" else None
    return export_run(Path(run_dir), Path(out) if out is not None else None, fp16=fp16, int8=int8)


def build_index(
    model: PathLike,
    data: Data,
    out: PathLike,
    *,
    split: str = "all",
    float_kind: str = "flat",
    binary_kind: str = "flat",
    progress: bool = True,
) -> builder.BuildReport:
    """Embed a dataset (any layout ``retrieval data`` reads, or a list of ``ImageRecord``) with an
    export or run directory and write a float + binary index to ``out``; ``split``: all, train, val or test."""
    records = select_split(_records(data), split)
    return builder.build_index(
        Path(model), records, Path(out), float_kind=float_kind, binary_kind=binary_kind, progress=progress
    )


def search(
    index: PathLike,
    images: ImageLike | Sequence[ImageLike],
    k: int = 10,
    *,
    kind: Literal["float", "binary"] = "float",
    rerank: int | None = None,
    where: Mapping[str, Any] | None = None,
) -> list[list[Hit]]:
    """The ``k`` most similar items of each image (a path or a PIL image), embedded with the index's
    own model: per image a list of ``(Item, score)``, best first. ``where`` filters by label and
    metadata like the service's ``filter``, e.g. ``{"label": "red_circle"}``."""
    queries = [images] if isinstance(images, str | Path | Image.Image) else list(images)
    if not queries:
        raise DataError("search() needs at least one image")
    index = Path(index)
    embedder = OnnxEmbedder(resolve_query_model(index, load_index_manifest(index).model_dir))
    with open_store(index, expected_model_sha256=embedder.model_sha256) as store:
        vectors = _embed(embedder, queries)
        return ranked_hits(store, vectors, k, kind=kind, rerank=rerank, where=parse_filter(where))


def evaluate(
    model: PathLike | None = None,
    data: Data | None = None,
    *,
    index: PathLike | None = None,
    split: str = "test",
    ks: Sequence[int] | None = None,
    progress: bool = True,
) -> EvaluationReport:
    """Float and binary retrieval metrics, as ``retrieval eval``: of a model on a dataset's ``split``
    (``model`` and ``data``), or of an index as built (``index``)."""
    if index is not None:
        with open_store(Path(index)) as store:
            return evaluate_index(store, ks=ks, progress=progress)[0]
    if model is None or data is None:
        raise ConfigError("evaluate() needs model and data (a model on a dataset), or index (an index as built)")
    records = select_split(_records(data), split)
    return evaluate_model(Path(model), records, ks=ks, progress=progress)[0]


def embed(
    model: PathLike | None = None,
    data: Data | None = None,
    *,
    index: PathLike | None = None,
    split: str = "all",
    batch_size: int = _EMBED_BATCH,
    progress: bool = True,
) -> EmbeddingTable:
    """``retrieval embed``: a dataset's ``split`` embedded with an export or run directory (ids are the
    images' positions in the split; unreadable images are skipped with a warning), or an index's stored
    embeddings with its item ids (``index``). ``write_embedding_table`` writes the table as the command does."""
    if index is not None:
        with open_store(Path(index)) as store:
            return stored_embedding_table(store)
    if model is None or data is None:
        raise ConfigError("embed() needs model and data (a model on a dataset), or index (an index's embeddings)")
    embedder = OnnxEmbedder(resolve_export_dir(Path(model)))
    result = embedding_table(embedder, select_split(_records(data), split), batch_size=batch_size, progress=progress)
    for path, reason in result.failures:
        warnings.warn(f"skipped {path}: {reason}", stacklevel=2)
    return result.table


def _records(data: Data) -> list[ImageRecord]:
    return load_records(Path(data)) if isinstance(data, str | Path) else list(data)


def _embed(embedder: OnnxEmbedder, images: Sequence[ImageLike]) -> np.ndarray:
    """Embeddings of paths (read with the one decoder) and PIL images, a batch at a time."""
    parts = []
    for start in range(0, len(images), _EMBED_BATCH):
        batch = images[start : start + _EMBED_BATCH]
        parts.append(embedder.embed_images([i if isinstance(i, Image.Image) else open_rgb(Path(i)) for i in batch]))
    return np.concatenate(parts)

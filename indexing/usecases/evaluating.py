"""Evaluate a model on a dataset or an index as built: ``evaluate`` (the Python API) and the richer
``evaluate_index_dir`` / ``evaluate_dataset`` + ``save_evaluation`` of ``retrieval eval`` (the
retrieval grid, each query's neighbours, the training-class warning, ``metrics.json`` and its ``calibration``
block, ``calibration.png``) and, for a model with a text tower, the text -> image row (``add_text_to_image``)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR
from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.common.score_calibration import CalibrationKind
from retrieval.indexing.common.table_files import write_table
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.splits import select_split
from retrieval.indexing.eval.class_overlap import overlap_warning, training_classes_in
from retrieval.indexing.eval.evaluation import (
    EvalData,
    EvaluationReport,
    evaluate_index,
    evaluate_model,
    exact_neighbors,
    grid_queries,
    grid_rows,
    index_neighbors,
)
from retrieval.indexing.eval.neighbour_table import neighbour_columns
from retrieval.indexing.eval.postprocess_eval import postprocess_metrics
from retrieval.indexing.eval.retrieval_grid import GridRow, save_grid
from retrieval.indexing.eval.text_to_image import DEFAULT_PROMPT, check_prompt, class_prompts, text_to_image_metrics
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.exported_model.onnx_embedder import load_model_manifest
from retrieval.indexing.exported_model.resolution import is_export_dir, resolve_export_dir
from retrieval.indexing.exported_model.text_encoder import text_encoder_of
from retrieval.indexing.probability.held_out import calibration_document, held_out_reports, labelled_set
from retrieval.indexing.probability.reliability import CalibrationReport
from retrieval.indexing.probability.reliability_plot import CALIBRATION_PLOT_NAME, save_reliability_plot
from retrieval.indexing.search.postprocess_params import PostprocessParams
from retrieval.indexing.store.backends import open_store
from retrieval.indexing.usecases.inputs import Data, PathLike, embed_texts, records_of

METRICS_NAME = "metrics.json"
GRID_NAME = "retrieval_grid.png"
GRID_NEIGHBORS = 8


def evaluate(
    model: PathLike | None = None,
    data: Data | None = None,
    *,
    index: PathLike | None = None,
    split: str = "test",
    ks: Sequence[int] | None = None,
    progress: bool = True,
    prompt: str = DEFAULT_PROMPT,
) -> EvaluationReport:
    """Float and binary retrieval metrics, as ``retrieval eval``: of a model on a dataset's ``split``
    (``model`` and ``data``), or of an index as built (``index``). Evaluated classes the model trained on
    are a ``UserWarning``, as ``retrieval eval`` warns. A model with a text tower also gets
    ``text_to_image``: each class's ``prompt`` (``{label}``: its folder name as words) searched in the images."""
    request = EvalRequest.of(model, data, index=index, split=split, ks=ks, spelling=API_SOURCES, prompt=prompt)
    evaluation = run_eval(request, progress=progress)
    if evaluation.warning is not None:
        warnings.warn(evaluation.warning, UserWarning, stacklevel=2)
    return evaluation.report


CLI_SOURCES = "pass either --model MODEL --data PATH, or --index INDEX_DIR"
API_SOURCES = "evaluate() needs model and data (a model on a dataset), or index (an index as built)"


@dataclass(frozen=True)
class EvalRequest:
    """One evaluation (``retrieval eval`` and the Python API's ``evaluate``): a ``model`` on the ``split`` of
    ``data``, or an ``index`` as built; ``grid`` queries in the retrieval grid, each query's top
    ``neighbours_k`` (None: not listed), and each ``postprocess`` method's metrics."""

    model: Path | None = None
    data: Data | None = None
    index: Path | None = None
    split: str = "test"
    ks: tuple[int, ...] | None = None
    grid: int = 0
    neighbours_k: int | None = None
    batch_size: int = 32
    threads: int | None = None
    postprocess: tuple[str, ...] = ()
    postprocess_params: PostprocessParams | None = None
    prompt: str = DEFAULT_PROMPT

    @classmethod
    def of(
        cls,
        model: PathLike | None = None,
        data: Data | None = None,
        *,
        index: PathLike | None = None,
        spelling: str = CLI_SOURCES,
        **options: Any,
    ) -> EvalRequest:
        """The request, refused with ``spelling`` (how the door names its sources) unless it names a model
        and data, or an index alone."""
        if (index is None) == (model is None) or (model is not None and data is None) or (index and data):
            raise ConfigError(spelling)
        if options.get("ks") is not None:
            options["ks"] = tuple(options["ks"])
        check_prompt(options.get("prompt", DEFAULT_PROMPT))  # a bad --prompt fails before any embedding
        given = Path(index) if index is not None else None
        return cls(Path(model) if model is not None else None, data, given, **options)


@dataclass
class Evaluation:
    """An evaluation and what ``retrieval eval`` writes and says besides its metrics."""

    report: EvaluationReport
    data: EvalData
    manifest: ModelManifest  # of the evaluated model
    grid: list[GridRow]  # the rows of retrieval_grid.png (none: no grid)
    neighbours: tuple[np.ndarray, np.ndarray] | None  # (query positions, their top-k gallery positions)
    warning: str | None  # the evaluated classes include training classes of the model
    records: list[ImageRecord] = field(default_factory=list)  # evaluated (a dataset's split)
    all_records: list[ImageRecord] = field(default_factory=list)  # the whole dataset
    calibration: dict[CalibrationKind, CalibrationReport] = field(default_factory=dict)  # calibration.png's


def run_eval(request: EvalRequest, *, progress: bool = True) -> Evaluation:
    """The one eval use case: an index as built (``evaluate_index_dir``) or a model on a dataset's split
    (``evaluate_dataset``), with the training-class warning, the post-processing rows and the split."""
    if request.index is not None:
        return evaluate_index_dir(request, progress=progress)
    return evaluate_dataset(request, progress=progress)


def evaluate_index_dir(request: EvalRequest, *, progress: bool = True) -> Evaluation:
    """An index as built: its metrics, ``grid`` grid queries and each query's top ``neighbours_k``, and
    each ``postprocess`` method's metrics on its stored embeddings."""
    assert request.index is not None  # EvalRequest.of checks
    index, postprocess = request.index, request.postprocess
    with open_store(index) as store:
        report, data = evaluate_index(store, ks=request.ks, progress=progress)
        augmented = store.manifest.postprocess.dba is not None
        if augmented and any(method.startswith("dba") for method in postprocess):
            raise ConfigError(
                f"{index} was built with --dba: its stored vectors are augmented already; evaluate "
                "dba and dba+qe on a model (--model --data) or an index built without --dba"
            )
        params = request.postprocess_params or store.manifest.postprocess.params()
        add_postprocess(report, data, postprocess, params, store.manifest.binarization_threshold)
        queries = grid_queries(data, request.grid)
        neighbors = index_neighbors(store, data, queries, GRID_NEIGHBORS) if len(queries) else None
        every = np.flatnonzero(data.is_query)
        top = request.neighbours_k
        ranked = (every, index_neighbors(store, data, every, top)) if top else None
        manifest = store.manifest.model
    add_text_to_image(report, data, index / INDEX_MODEL_SUBDIR, request)
    return _evaluation(report, data, manifest, _grid(data, queries, neighbors), ranked)


def evaluate_dataset(request: EvalRequest, *, progress: bool = True) -> Evaluation:
    """A model on the ``split`` of a dataset: exact metrics, grid queries and each query's neighbours, and
    each ``postprocess`` method's metrics."""
    assert request.model is not None and request.data is not None  # EvalRequest.of checks
    model = request.model
    all_records = records_of(request.data)
    records = select_split(all_records, request.split)
    report, eval_data = evaluate_model(
        model, records, ks=request.ks, batch_size=request.batch_size, threads=request.threads, progress=progress
    )
    report.details["split"] = request.split
    threshold = load_model_manifest(resolve_export_dir(model)).binarization_threshold
    add_postprocess(
        report, eval_data, request.postprocess, request.postprocess_params or PostprocessParams(), threshold
    )
    queries = grid_queries(eval_data, request.grid)
    neighbors = exact_neighbors(eval_data, queries, GRID_NEIGHBORS) if len(queries) else None
    every = np.flatnonzero(eval_data.is_query)
    top = request.neighbours_k
    ranked = (every, exact_neighbors(eval_data, every, top)) if top else None
    manifest = load_model_manifest(resolve_export_dir(model))
    add_text_to_image(report, eval_data, resolve_export_dir(model), request)
    evaluation = _evaluation(report, eval_data, manifest, _grid(eval_data, queries, neighbors), ranked)
    evaluation.records, evaluation.all_records = records, all_records
    return evaluation


def add_postprocess(
    report: EvaluationReport, data: EvalData, methods: Sequence[str], params: PostprocessParams, threshold: float
) -> None:
    """``report.postprocess``: each method's float and binary metrics, and the parameters they ran with."""
    if not methods:
        return
    report.postprocess = postprocess_metrics(
        data.embeddings, data.labels, data.is_query, data.is_gallery, methods, params, ks=report.ks, threshold=threshold
    )
    report.details["postprocess_params"] = params.model_dump()


def add_text_to_image(report: EvaluationReport, data: EvalData, export_dir: Path, request: EvalRequest) -> None:
    """``report.text_to_image``: a prompt per evaluated class embedded by the text tower of the model in
    ``export_dir`` (as every text query is: ``embed_texts``) and searched in the evaluated gallery images;
    nothing for a model without a text tower (or an index built from vectors alone)."""
    manifest = load_model_manifest(export_dir) if is_export_dir(export_dir) else None
    if manifest is None or manifest.text is None:
        return
    gallery_labels = data.labels[data.is_gallery]
    classes, prompts = class_prompts(gallery_labels.astype(str).tolist(), request.prompt)
    vectors = embed_texts(text_encoder_of(export_dir, manifest, threads=request.threads), prompts)
    gallery = data.embeddings[data.is_gallery]
    report.text_to_image = text_to_image_metrics(vectors, classes, gallery, gallery_labels, report.ks)
    report.details["text_prompt"] = request.prompt


def _grid(data: EvalData, queries: np.ndarray, neighbors: np.ndarray | None) -> list[GridRow]:
    return grid_rows(data, queries, neighbors) if neighbors is not None else []


def _evaluation(
    report: EvaluationReport,
    data: EvalData,
    manifest: ModelManifest,
    grid: list[GridRow],
    ranked: tuple[np.ndarray, np.ndarray] | None,
) -> Evaluation:
    """The evaluation, its report noting (in ``training_classes_evaluated``) the model's training classes
    among the evaluated ones."""
    overlap = training_classes_in(data.labels, manifest)
    report.details["training_classes_evaluated"] = len(overlap)
    warning = overlap_warning(overlap, len(set(data.labels.tolist()))) if overlap else None
    evaluated = labelled_set(data.embeddings, data.labels, data.is_query, data.is_gallery)
    reports = held_out_reports(manifest.calibration, evaluated) if manifest.calibration is not None else {}
    report.details["calibration"] = calibration_document(manifest.calibration, reports)
    return Evaluation(report, data, manifest, grid, ranked, warning, calibration=reports)


@dataclass(frozen=True)
class EvaluationFiles:
    """What ``save_evaluation`` wrote."""

    metrics: Path
    grid: Path | None
    neighbours: Path | None
    calibration: Path | None = None


def save_evaluation(evaluation: Evaluation, out_dir: Path, neighbours: Path | None = None) -> EvaluationFiles:
    """``metrics.json`` and ``retrieval_grid.png`` (when there are grid rows) in ``out_dir``, and each
    query's neighbours in ``neighbours`` (.parquet or .csv) when given."""
    metrics = out_dir / METRICS_NAME
    atomic_write_text(metrics, json.dumps(evaluation.report.to_json(), indent=2, default=_json_default) + "\n")
    grid = save_grid(evaluation.grid, out_dir / GRID_NAME) if evaluation.grid else None
    if neighbours is not None and evaluation.neighbours is not None:
        write_table(neighbours, neighbour_columns(evaluation.data, *evaluation.neighbours))
    else:
        neighbours = None
    plot = CALIBRATION_PLOT_NAME
    calibration = save_reliability_plot(evaluation.calibration, out_dir / plot) if evaluation.calibration else None
    return EvaluationFiles(metrics, grid, neighbours, calibration)


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")

"""Turn the ``--model`` argument into an export directory holding ``model.onnx`` + ``model.json``.

Accepted: an export directory itself, a training run directory (its ``export/``), or an
index directory (its self-contained ``model/`` copy).
"""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.common.artifact_names import (
    ENSEMBLE_MEMBERS_SUBDIR,
    INDEX_MODEL_SUBDIR,
    MODEL_MANIFEST_NAME,
    MODEL_ONNX_NAME,
    RUN_BEST_CHECKPOINT_NAME,
    RUN_CHECKPOINTS_SUBDIR,
    RUN_CONFIG_NAME,
    RUN_EXPORT_SUBDIR,
)
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.model_manifest import ModelManifest, file_sha256


def is_export_dir(path: Path) -> bool:
    return (Path(path) / MODEL_MANIFEST_NAME).is_file() and (Path(path) / MODEL_ONNX_NAME).is_file()


def resolve_export_dir(model: Path) -> Path:
    """The export directory ``model`` names, as an absolute path, or a ConfigError saying what to do."""
    model = Path(model).expanduser()
    if not model.exists():
        raise ConfigError(f"model path {model} does not exist; pass an export directory or a training run directory")
    if not model.is_dir():
        raise ConfigError(f"model path {model} is a file; pass the directory that holds model.onnx and model.json")
    for candidate in (model, model / RUN_EXPORT_SUBDIR, model / INDEX_MODEL_SUBDIR):
        if is_export_dir(candidate):
            if candidate == model / RUN_EXPORT_SUBDIR:
                _refuse_stale_export(model, candidate)
            return candidate.resolve()
    raise ConfigError(
        f"{model} holds no model.onnx + model.json (nor does {model / RUN_EXPORT_SUBDIR}); "
        f"if it is a training run, run `retrieval export {model}` first"
    )


def _refuse_stale_export(run_dir: Path, export_dir: Path) -> None:
    """A run's export must be of the checkpoints in the run now: after more training (``--resume``,
    ``--overwrite``) an old export would silently index with the previous model. The export records the
    sha256 of every checkpoint it was made from (``source_checkpoints``), so a copied (``cp -r``) or
    touched run keeps its export and changed weights do not; an export that records none (written
    before it did) is compared by modification time with the best checkpoint (an ensemble's: each member's)."""
    try:
        sources = ModelManifest.load(export_dir).source_checkpoints
    except (OSError, ValueError):  # a broken model.json is reported by whoever loads the model
        return
    if sources:
        for relative, sha256 in sorted(sources.items()):
            checkpoint = run_dir / relative
            if checkpoint.is_file() and file_sha256(checkpoint) != sha256:
                raise ConfigError(
                    f"{relative} has changed since the export in {export_dir} was made from it; "
                    f"refresh it with `retrieval export {run_dir}`"
                )
        return
    _refuse_older_export(run_dir, export_dir)


def _refuse_older_export(run_dir: Path, export_dir: Path) -> None:
    relative = Path(RUN_CHECKPOINTS_SUBDIR) / RUN_BEST_CHECKPOINT_NAME
    members = sorted((run_dir / ENSEMBLE_MEMBERS_SUBDIR).glob(f"*/{relative.as_posix()}"))
    exported = (export_dir / MODEL_ONNX_NAME).stat().st_mtime
    for checkpoint in [run_dir / relative, *members]:
        if checkpoint.is_file() and checkpoint.stat().st_mtime > exported:
            raise ConfigError(
                f"the export in {export_dir} is older than the checkpoint {checkpoint}; "
                f"refresh it with `retrieval export {run_dir}`"
            )


def resolve_query_model(index_dir: Path, recorded_model_dir: str, model: Path | None = None) -> Path:
    """The export directory to embed queries for an index: ``model`` if given, else the index's
    own ``model/`` copy, else the export directory recorded when the index was built."""
    if model is not None:
        return resolve_export_dir(model)
    for candidate in (Path(index_dir) / INDEX_MODEL_SUBDIR, Path(recorded_model_dir)):
        if is_export_dir(candidate):
            return candidate.resolve()
    raise ConfigError(
        f"{index_dir} has no model/ copy and the model it was built with ({recorded_model_dir}) is gone; "
        "pass --model with the export directory"
    )


def run_dir_of(model: Path) -> Path | None:
    """The training run directory of ``--model``: itself, or the run whose ``export/`` it is; None for an
    export without its run (``retrieval eval``'s reference column needs the run's config.yaml)."""
    if (Path(model) / RUN_CONFIG_NAME).is_file():
        return Path(model)
    export_dir = resolve_export_dir(model)
    run_dir = export_dir.parent
    return run_dir if export_dir.name == RUN_EXPORT_SUBDIR and (run_dir / RUN_CONFIG_NAME).is_file() else None

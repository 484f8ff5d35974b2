"""Export an ensemble run as ONE ONNX model whose output is the members' joined embedding.

The graph runs every member on the same preprocessed images and returns their L2-normalised
embeddings concatenated and normalised again (``EnsembleModel``), so ``model.json`` keeps the
single-model contract (one input, unit-norm output of ``embedding_dim`` = L x d) and indexing
and serving use it unchanged. Members share the backbone, image size and normalisation by
construction (they differ only in seed); a run whose members do not is refused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.transforms import eval_preprocessing
from retrieval.training.ensemble.ensemble_training import read_ensemble_spec
from retrieval.training.export.int8_export import Int8Request
from retrieval.training.export.onnx_export import (
    ExportResult,
    build_manifest,
    checkpoint_hashes,
    write_checked_export,
)
from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.model.ensemble_model import EnsembleModel
from retrieval.training.run.outputs.run_dir import RunPaths
from retrieval.training.run.outputs.run_model import load_run_model


def export_ensemble(
    paths: RunPaths, out: Path, *, fp16: bool, checkpoint: Literal["best", "last"], int8: Int8Request | None
) -> ExportResult:
    """Join the members' ``checkpoint`` models into one parity-checked ONNX export in ``out`` (``export_run``
    chose it and the options); ``int8`` quantizes it (calibrated and checked on member 0's data splits, which
    all members share)."""
    spec = read_ensemble_spec(paths.run_dir)
    if spec is None:
        raise RetrievalError(f"{paths.run_dir} is not an ensemble run (it has no {paths.ensemble_spec.name})")
    count = spec.members
    members = _load_members(paths, count, checkpoint)
    configs = [config for config, _, _ in members]
    model = EnsembleModel([member for _, _, member in members]).eval()
    # member 0's checkpoint describes the members (loss, data); the validation metrics are the joined ones
    summary = {**members[0][1], "val_metrics": _joined_validation(paths) if checkpoint == "best" else {}}
    ensemble_hash = hashlib.sha256("".join(c.config_hash() for c in configs).encode()).hexdigest()[:16]

    member_paths = [RunPaths(paths.member_dir(index)) for index in range(count)]
    sources = checkpoint_hashes(
        paths.run_dir, [m.best_checkpoint if checkpoint == "best" else m.last_checkpoint for m in member_paths]
    )

    def manifest_for(onnx_bytes: bytes, precision: str) -> ModelManifest:
        manifest = build_manifest(configs[0], summary, onnx_bytes, model.embedding_dim, precision, None, sources)
        return manifest.model_copy(update={"config_hash": ensemble_hash, "ensemble_members": count})

    request = int8.for_run(configs[0].data) if int8 is not None else None
    return write_checked_export(
        model, configs[0].data.image_size, out, fp16=fp16, manifest_for=manifest_for, int8=request
    )


def _load_members(
    paths: RunPaths, count: int, checkpoint: Literal["best", "last"]
) -> list[tuple[TrainConfig, dict[str, Any], EmbeddingModel]]:
    """Every member's config, checkpoint and model; one preprocessing for all, or a clear error."""
    members = []
    for index in range(count):
        member_dir = paths.member_dir(index)
        if not RunPaths(member_dir).best_checkpoint.is_file():
            raise RetrievalError(
                f"member {index} of the ensemble {paths.run_dir} has not been trained yet ({member_dir}); "
                f"finish it with `retrieval train --out {paths.run_dir} --resume`"
            )
        members.append(load_run_model(member_dir, checkpoint))
    configs = [config for config, _, _ in members]
    preprocessing = {eval_preprocessing(c.data, c.model.backbone).model_dump_json() for c in configs}
    if len(preprocessing) > 1 or len({c.model.backbone for c in configs}) > 1:
        raise RetrievalError(
            f"the members of {paths.run_dir} differ in backbone or preprocessing; one ONNX model needs one input"
        )
    return members


def _joined_validation(paths: RunPaths) -> dict[str, Any]:
    """The joined embedding's validation metrics of the best checkpoints (``ensemble_metrics.json``), if written."""
    if not paths.ensemble_metrics.is_file():
        return {}
    return json.loads(paths.ensemble_metrics.read_text()).get("val") or {}

"""``model.json``: what an exported ONNX model needs around it to be used correctly.

Written by ``retrieval export`` (training), read by the ONNX embedder, the index
builder and the service. The preprocessing fields describe the eval transform exactly:
resize the shorter side to ``resize`` (bilinear), centre-crop ``crop`` x ``crop``,
scale to [0, 1], subtract ``mean`` and divide by ``std`` per channel, NCHW float32.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from retrieval.indexing.common.artifact_names import MODEL_MANIFEST_NAME, MODEL_ONNX_NAME

MANIFEST_FORMAT_VERSION = 1


class Preprocessing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resize: int = Field(256, gt=0, description="shorter side is resized to this many pixels")
    crop: int = Field(224, gt=0, description="centre crop size in pixels")
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    color_mode: Literal["RGB"] = "RGB"
    interpolation: Literal["bilinear"] = "bilinear"
    layout: Literal["NCHW"] = "NCHW"


class ModelManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    format_version: int = MANIFEST_FORMAT_VERSION
    onnx_file: str = MODEL_ONNX_NAME
    onnx_sha256: str
    input_name: str = "images"
    output_name: str = "embeddings"
    embedding_dim: int = Field(gt=0)
    l2_normalized: bool = True
    binarization_threshold: float = 0.0
    precision: Literal["fp32", "fp16"] = "fp32"
    preprocessing: Preprocessing = Preprocessing()
    backbone: str
    loss: str
    config_hash: str
    validation_metrics: dict[str, float] = {}
    training_classes: list[str] = Field(
        default_factory=list,
        description="labels of the training half (fitted or used to pick the epoch); `retrieval eval` warns "
        "when they are evaluated, since retrieval on them overstates quality on unseen classes",
    )
    ensemble_members: int = Field(
        1, ge=1, description="models whose L2-normalised embeddings the graph concatenates and normalises again"
    )
    created_at: str

    @classmethod
    def load(cls, export_dir: Path) -> ModelManifest:
        """Read ``export_dir/model.json``; raises FileNotFoundError / pydantic.ValidationError."""
        return cls.model_validate_json((Path(export_dir) / MODEL_MANIFEST_NAME).read_text())


def file_sha256(path: Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_json(manifest: ModelManifest) -> str:
    return json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

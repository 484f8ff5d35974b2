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
from retrieval.indexing.common.score_calibration import ScoreCalibration
from retrieval.indexing.exported_model.copy_threshold import CopyThreshold
from retrieval.indexing.exported_model.text_side import TextSide
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict

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


class Int8Check(BaseModel):
    """The retrieval check an INT8 export passed: the float model and the INT8 one on the same images."""

    model_config = ConfigDict(extra="forbid")

    split: str = Field(description="the run's split the check embedded (its validation classes)")
    images: int = Field(ge=0, description="images embedded by both models")
    map_at_r_fp32: float
    map_at_r_int8: float
    recall_at_1_fp32: float
    recall_at_1_int8: float
    binary_map_at_r_fp32: float
    binary_map_at_r_int8: float
    max_map_drop: float = Field(description="the largest MAP@R drop allowed, in points (1 point = 0.01)")
    forced: bool = Field(False, description="written with --force although the drop exceeded max_map_drop")
    cpu: str | None = Field(
        None, description="the CPU kind the check ran on (indexing.model.cpu_kind); None in older exports"
    )


class Quantization(BaseModel):
    """How ``retrieval export --quantize int8`` derived this model from the float one."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["int8"] = "int8"
    format: Literal["QDQ", "QOperator"] = "QDQ"
    activations: str = "uint8 per tensor, asymmetric"
    weights: str = "int8 per output channel, symmetric"
    reduce_range: bool = Field(
        False,
        description="weights in 7 bits, so CPUs without VNNI compute the same sums as those with it "
        "(indexing.model.cpu_kind); False in older exports",
    )
    calibration_method: str = "MinMax"
    calibration_split: str = "train"
    calibration_images: int = Field(ge=0, description="0: quantized dynamically (a transformer), nothing calibrated")
    float_onnx_sha256: str = Field(description="sha256 of the fp32 model.onnx it was quantized from")
    float_nodes: list[str] = Field(default_factory=list, description="node kinds kept in float on purpose")
    check: Int8Check | None = Field(None, description="None only when forced without a validation split")


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
    precision: Literal["fp32", "fp16", "int8"] = "fp32"
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
    quantization: Quantization | None = Field(None, description="set for an INT8 export (`--quantize int8`)")
    source_checkpoints: dict[str, str] = Field(
        default_factory=dict,
        description="sha256 of each checkpoint the model was exported from, by its path in the run directory; "
        "`--model RUN` refuses the export once one of them has changed (more training since the export)",
    )
    verdict: TrainingVerdict | None = Field(
        None,
        description="the training run's verdict: whether training beat the backbone it started from beyond the "
        "noise of the validation queries (the gain's interval, the counts it rests on), or that the starting "
        "backbone was kept, in one sentence and typed",
    )
    calibration: ScoreCalibration | None = Field(
        None,
        description="P(same class) of a hit's score, fitted on the validation classes (indexing.probability); "
        "None: no validation classes to fit on (--split none), so hits carry no probability",
    )
    duplicates: CopyThreshold | None = Field(
        None,
        description="the similarity above which two images are copies, float and binary, measured at export on "
        "synthetic copies of training images against distinct images of the same class (the default threshold of "
        "`retrieval data duplicates` and `retrieval index duplicates`); None in older exports",
    )
    text: TextSide | None = Field(
        None, description="the text tower beside the image model (CLIP/SigLIP, training-free); None: no text queries"
    )
    text_dropped: str | None = Field(
        None,
        description="why a model whose backbone has a text tower carries none (a training, whitening or ITQ stage "
        "changed the image space), in one sentence",
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


def model_files_sha256(export_dir: Path, manifest: ModelManifest) -> str:
    """One sha256 of an export's ONNX graph and its ``model.json`` (the preprocessing that feeds it):
    recorded by an index, so that a changed setting (``resize``, ``crop``, ``mean``) is caught too."""
    parts = (file_sha256(Path(export_dir) / manifest.onnx_file), file_sha256(Path(export_dir) / MODEL_MANIFEST_NAME))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def manifest_json(manifest: ModelManifest) -> str:
    return json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

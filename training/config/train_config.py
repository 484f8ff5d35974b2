"""The training configuration: one pydantic model, loaded from YAML, overridden from the CLI.

Unknown keys are rejected (``extra="forbid"``) so a typo never silently falls back to a
default. ``load_config`` turns pydantic's errors into one sentence naming the key.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from retrieval.indexing.common.errors import ConfigError

MAX_EMBEDDING_DIM = 65_536  # 2048 is the papers' size; far larger only exhausts memory (a D x D head)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """YAML's ``true`` is not the number 1: a bool given for a numeric key is an error."""
        field = cls.model_fields.get(info.field_name or "")
        accepted = set(get_args(field.annotation)) | {field.annotation} if field else set()
        if isinstance(value, bool) and bool not in accepted and accepted & {int, float}:
            raise ValueError(f"expects a number, got {str(value).lower()}")
        return value


class DataConfig(_Strict):
    path: Path | None = Field(None, description="ImageFolder dir, CSV manifest or CUB/Cars196/SOP/In-Shop root")
    val_fraction: float = Field(0.2, ge=0.0, lt=1.0, description="share of training classes held out for validation")
    val_fold: int | None = Field(
        None, ge=0, description="use fold i of num_folds (Reality Check) instead of val_fraction"
    )
    num_folds: int = Field(4, ge=2)
    split: Literal["classes", "none"] = Field(
        "classes",
        description="classes: class-disjoint train / validation / test (measures on classes never trained on); "
        "none: every class trains, nothing is held out and nothing measured (see also trainer.final_fit)",
    )
    max_images_per_class: int | None = Field(
        None,
        ge=2,
        description="keep at most this many images of each class, a deterministic subsample applied before "
        "splitting (so in every split); for quick runs",
    )
    exclude: Path | None = Field(
        None,
        description="a file of image paths to leave out, one a line (`retrieval data duplicates --exclude-list` "
        "writes one); the run logs how many it left out and lists them in RUN_DIR/excluded.txt",
    )
    image_size: int = Field(224, gt=0, description="crop size; eval resizes the shorter side to image_size * 8/7")
    train_crop_scale: tuple[float, float] = (0.16, 1.0)
    horizontal_flip: bool = True
    color_jitter: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="training augmentation: random brightness, contrast and saturation change of up to this "
        "fraction and a hue shift of up to half of it (0: off); for classes whose colour is not what tells "
        "them apart (a car model comes in every paint), never for ones it does (bird species)",
    )
    sampler: Literal["auto", "balanced", "shuffle"] = Field(
        "auto", description="auto: class-balanced C x M for pair losses, plain shuffling for classification losses"
    )
    images_per_class: int = Field(4, ge=1, description="M of the class-balanced sampler")
    meta_classes: int | None = Field(
        None,
        ge=2,
        description="DREML: train on the training classes randomly grouped into this many meta-classes "
        "(seeded by trainer.seed; validation and test keep the true classes)",
    )
    small_classes: Literal["drop", "pad"] = Field(
        "drop",
        description="balanced sampler, classes with fewer than M images: drop them, or pad them with repeats "
        "drawn with replacement (pml's MPerClassSampler; SOP has many classes of 2-3 images)",
    )
    batches_per_epoch: int | None = Field(None, ge=1, description="balanced sampler: default = images // batch size")
    num_workers: int = Field(2, ge=0, description="DataLoader worker processes")
    on_bad_image: Literal["skip", "fail"] = Field("skip", description="skip or fail on unreadable images")


class ModelConfig(_Strict):
    backbone: str = Field(
        "resnet18",
        description="resnet18, resnet50, densenet121, efficientnet_lite0, ... (`retrieval backbones`) or timm:NAME "
        "for any timm model",
    )
    pretrained: str | None = Field(
        None,
        description="'imagenet' (the backbone's ImageNet weights, offline), 'torchvision' (local cache), 'hub' (a "
        "vision transformer's or timm:NAME's weights from the Hugging Face hub, downloaded only with allow_download) "
        "or a file (.safetensors, .pth, .bin)",
    )
    allow_download: bool = Field(
        False,
        description="let pretrained='hub' download the weights when they are not cached (with a progress bar, its "
        "size shown first, its checksum verified; also RETRIEVAL_ALLOW_DOWNLOAD=1); without it nothing is ever "
        "fetched",
    )
    weights_cache: str | None = Field(
        None,
        description="the folder hub weights are cached in, by pretrained='hub' and for a transformer's or timm "
        "model's pretrained='imagenet' (also RETRIEVAL_WEIGHTS_CACHE); null: the Hugging Face cache (HF_HUB_CACHE, "
        "~/.cache/huggingface/hub)",
    )
    pooling: Literal["avg", "max", "avgmax", "mean", "cls", "cls+mean", "map"] = Field(
        "avg",
        description="avg (mean), max, avgmax: over the feature map or a transformer's patch tokens; cls: a "
        "transformer's class token; cls+mean: both, concatenated; map: an attention-pool head over a transformer's "
        "tokens, learnt with the head (SigLIP's own; training.model.token_pooling)",
    )
    layer_norm: bool = Field(True, description="LayerNorm without affine after pooling (Zhai & Wu)")
    embedding_dim: int | None = Field(
        2048,
        gt=0,
        le=MAX_EMBEDDING_DIM,
        description="embedding size (bits of the binary index); null: no linear layer, the pooled features are the "
        "embedding",
    )
    freeze_batchnorm: bool = False
    frozen_stages: int = Field(
        0,
        ge=0,
        description="the trunk's first stages kept frozen (no gradients, inference-mode BatchNorm); training skips "
        "their backward pass and, with trainer.cached_views, their forward pass after the first epoch "
        "(training.model.trunk_stages lists a backbone's stages)",
    )
    channels_last: bool = True
    whitened_dim: int | None = Field(
        None,
        gt=0,
        le=MAX_EMBEDDING_DIM,
        description="written by the whitening stage into a checkpoint's own model section (the size of the fitted "
        "linear map between the embedding and the final L2 normalisation); not a setting: use the whitening section",
    )


class LossConfig(_Strict):
    name: str = Field("normalized_softmax", description="loss name (see `retrieval losses`)")
    params: dict[str, Any] = Field(default_factory=dict, description="passed to the loss builder")
    miner: str | None = Field(None, description="null: the loss's default miner; 'none': no miner; else a miner name")
    miner_params: dict[str, Any] = Field(default_factory=dict)
    lr: float | None = Field(
        None, gt=0, description="learning rate of loss parameters (proxies); default optimizer.lr * 10"
    )


class OptimizerConfig(_Strict):
    name: Literal["sgd", "adam", "adamw", "rmsprop"] = "adamw"
    lr: float = Field(1e-4, gt=0, description="backbone learning rate")
    head_lr: float | None = Field(None, gt=0, description="learning rate of the new layers; default = lr")
    layer_decay: float | None = Field(
        None,
        gt=0,
        le=1,
        description="layer-wise learning-rate decay: the backbone's last stage trains at lr, each earlier stage "
        "(a ViT's blocks, then its patch embedding) at this times the next one's (0.65-0.75 for ViT-B fine-tuning); "
        "None: the whole backbone at lr",
    )
    weight_decay: float = Field(1e-4, ge=0)
    momentum: float = Field(0.9, ge=0)
    grad_clip_norm: float | None = Field(10.0, gt=0)


class ScheduleConfig(_Strict):
    name: Literal["constant", "step", "cosine"] = "cosine"
    warmup_epochs: float = Field(0.0, ge=0)
    step_epochs: int = Field(10, ge=1)
    step_gamma: float = Field(0.1, gt=0)
    min_lr_ratio: float = Field(0.01, ge=0)


class TrainerConfig(_Strict):
    epochs: int = Field(
        10,
        ge=0,
        description="training epochs; 0: no training, the run's model is the starting backbone (the reference row)",
    )
    batch_size: int = Field(
        32, ge=2, description="images per step in each process (torchrun: the global batch is processes x this)"
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto (CUDA if present) | cpu | cuda")
    amp: Literal["auto", "off", "bf16", "fp16"] = "auto"
    warm_start_epochs: int = Field(0, ge=0, description="epochs that train only the new layers and the loss")
    patience: int | None = Field(None, ge=1, description="stop after this many epochs without a better val MAP@R")
    seed: int = Field(0, description="random seed")
    eval_batch_size: int = Field(64, ge=1)
    recall_ks: tuple[int, ...] | None = Field(
        None, description="Recall@K cut-offs; null: the defaults `retrieval eval` uses for the gallery"
    )
    max_steps_per_epoch: int | None = Field(None, ge=1, description="cap steps per epoch (quick runs)")
    cached_views: int | None = Field(
        None,
        ge=1,
        description="with model.frozen_stages: the frozen stages' activations of this many augmented views per "
        "training image are made once and reused every epoch (each view once per cached_views epochs); "
        "null: augment and run the frozen stages at every step",
    )
    cache_max_gb: float = Field(8.0, gt=0, description="largest activation cache trainer.cached_views may make")
    select_reference: bool = Field(
        True,
        description="epoch 0, the starting backbone as the reference row defines it, is a candidate for the best "
        "epoch: a run whose training never beats it on validation keeps it (and says so)",
    )
    evaluate_untrained_test: bool = Field(
        True,
        description="also report the reference row: the starting backbone's pooled features on the test classes "
        "('pretrained' or 'untrained'; training.reference; reported only, never used to choose)",
    )
    tensorboard: bool = Field(
        False, description="also write TensorBoard event files to RUN_DIR/tensorboard (training.tracking)"
    )
    final_fit: bool = Field(
        False,
        description="after the class-disjoint fit chooses the best epoch (RUN_DIR/selection), train the run's model "
        "again on every class for that many epochs; the test figures are the first fit's",
    )


class WhiteningConfig(_Strict):
    """A linear map fitted after training on the training classes' embeddings (``training.run.whitening_stage``)."""

    method: Literal["none", "pca", "supervised", "auto"] = Field(
        "none",
        description="none; pca (centre, PCA-whiten); supervised (whiten the within-class scatter, project on the "
        "leading directions: Radenovic et al. 2018); auto: none, pca or supervised, chosen on the validation classes",
    )
    dim: int | None = Field(
        None, gt=0, description="dimensions the whitening keeps; null: chosen among candidate_dims on validation"
    )
    candidate_dims: tuple[int, ...] = Field((256, 512, 1024), description="the dims validation chooses from")
    shrinkage: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="covariance shrunk towards its mean eigenvalue: (1 - s) C + s mean(eig) I; null: chosen among "
        "candidate_shrinkages on validation",
    )
    candidate_shrinkages: tuple[float, ...] = Field(
        (0.1, 0.3, 0.6), description="the shrinkages validation chooses from"
    )
    bits: Literal[512, 1024, 2048] = Field(
        2048, description="output size = bits of the binary code; fewer whitened dims are expanded orthogonally"
    )
    itq: bool = Field(True, description="learn the rotation before the sign (ITQ, Gong & Lazebnik 2011)")
    itq_iterations: int = Field(20, ge=0)
    fit_images: int = Field(10_000, ge=2, description="training-class images the map is fitted on (at most)")


class TrainConfig(_Strict):
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    loss: LossConfig = LossConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    trainer: TrainerConfig = TrainerConfig()
    whitening: WhiteningConfig = WhiteningConfig()

    def config_hash(self) -> str:
        """Hash of everything that shapes the model (not the data path), for manifests."""
        payload = self.model_dump(mode="json")
        payload["data"].pop("path", None)
        payload["trainer"].pop("tensorboard", None)  # where metrics go does not shape the model
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def config_default(path: str) -> Any:
    """The default of the key ``section.key`` (what a run gets when no layer sets it)."""
    section, key = path.split(".")
    return getattr(getattr(TrainConfig(), section), key)


def config_yaml(config: TrainConfig) -> str:
    """The resolved configuration as YAML: ``config.yaml`` of a run, ``retrieval train --print-config``."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def describe_validation_error(error: ValidationError, source: str) -> str:
    """One sentence per problem, naming the dotted key, e.g. ``trainer.epoch: unknown key``."""
    parts = []
    for item in error.errors():
        key = ".".join(str(p) for p in item["loc"]) or "(root)"
        message = _unknown_key(item["loc"]) if item["type"] == "extra_forbidden" else item["msg"]
        parts.append(f"{key}: {message}")
    return f"invalid configuration in {source}: " + "; ".join(parts)


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    """'unknown key' plus the keys valid at that place (and the closest one), e.g. for ``--set``."""
    section: type[BaseModel] = TrainConfig
    for part in loc[:-1]:
        field = section.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return "unknown key"
        section = annotation
    known = list(section.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    where = "sections" if len(loc) == 1 else f"keys of {'.'.join(map(str, loc[:-1]))}"
    return f"unknown key ({hint}{where}: {', '.join(known)})"


def merge_dicts(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_dicts(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_set(assignments: list[str]) -> dict[str, Any]:
    """``--set trainer.patience=3`` -> {"trainer": {"patience": 3}} (values parsed as YAML)."""
    layer: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE (e.g. trainer.patience=3), got '{assignment}'")
        *parents, leaf = key.split(".")
        node = layer
        for part in parents:
            node = node.setdefault(part, {})
        try:
            node[leaf] = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: the value {raw!r} is not valid YAML") from None
    return layer


def build_config(layers: list[tuple[str, dict[str, Any]]]) -> TrainConfig:
    """Merge (source name, partial dict) layers in order (recipe, file, CLI) and validate."""
    merged: dict[str, Any] = {}
    for _, layer in layers:
        merged = merge_dicts(merged, layer)
    try:
        return TrainConfig.model_validate(merged)
    except ValidationError as error:
        # validate each layer alone to name the one that holds the bad key
        for source, layer in layers:
            try:
                TrainConfig.model_validate(layer)
            except ValidationError as layer_error:
                raise ConfigError(describe_validation_error(layer_error, source)) from None
        raise ConfigError(describe_validation_error(error, "the merged configuration")) from None


def read_yaml(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text; save it as UTF-8 YAML") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {error}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections (data, model, loss, ...)")
    return loaded

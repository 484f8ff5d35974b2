"""A finished run's model: its config, a checkpoint and the eval-mode model restored from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from retrieval.indexing.common.errors import RetrievalError
from retrieval.training.config.train_config import ModelConfig, TrainConfig
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model
from retrieval.training.run.outputs.run_dir import RunPaths, load_checkpoint, load_run_config


def load_run_model(
    run_dir: Path, checkpoint: Literal["best", "last"] = "best"
) -> tuple[TrainConfig, dict[str, Any], EmbeddingModel]:
    """A run's config, its checkpoint and the eval-mode model restored from it (clear errors if they don't fit)."""
    paths = RunPaths(run_dir)
    config = load_run_config(paths.run_dir)
    state = load_checkpoint(paths.best_checkpoint if checkpoint == "best" else paths.last_checkpoint)
    config = checkpoint_config(state, config)
    return config, state, restore_model(state, config, paths.run_dir)


def checkpoint_config(state: dict[str, Any], config: TrainConfig) -> TrainConfig:
    """The run's config with the model section the checkpoint's state dict fits (epoch 0, the reference
    model, has no LayerNorm and its own embedding size; checkpoints before this key have the run's)."""
    saved = state.get("model_config")
    return config.model_copy(update={"model": ModelConfig.model_validate(saved)}) if saved else config


def restore_model(state: dict[str, Any], config: TrainConfig, run_dir: Path) -> EmbeddingModel:
    """The eval-mode model of a checkpoint (built from its own model section where it has one)."""
    if not isinstance(state.get("model"), dict):
        raise RetrievalError(
            f"the checkpoint in {run_dir} has no 'model' state dict; it was not written by `retrieval train`"
        )
    model = build_embedding_model(checkpoint_config(state, config).model, image_size=config.data.image_size)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as error:
        first_line = str(error).splitlines()[0]
        raise RetrievalError(
            f"the checkpoint in {run_dir} does not fit its config.yaml model section ({first_line})"
        ) from None
    return model.eval()

"""A finished run's model: its config, a checkpoint and the eval-mode model restored from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from retrieval.indexing.common.errors import RetrievalError
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model
from retrieval.training.run.run_dir import RunPaths, load_checkpoint, load_run_config


def load_run_model(
    run_dir: Path, checkpoint: Literal["best", "last"] = "best"
) -> tuple[TrainConfig, dict[str, Any], EmbeddingModel]:
    """A run's config, its checkpoint and the eval-mode model restored from it (clear errors if they don't fit)."""
    paths = RunPaths(run_dir)
    config = load_run_config(paths.run_dir)
    state = load_checkpoint(paths.best_checkpoint if checkpoint == "best" else paths.last_checkpoint)
    return config, state, _restore_model(config, state, paths.run_dir)


def _restore_model(config: TrainConfig, state: dict[str, Any], run_dir: Path) -> EmbeddingModel:
    if not isinstance(state.get("model"), dict):
        raise RetrievalError(
            f"the checkpoint in {run_dir} has no 'model' state dict; it was not written by `retrieval train`"
        )
    model = build_embedding_model(config.model)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as error:
        first_line = str(error).splitlines()[0]
        raise RetrievalError(
            f"the checkpoint in {run_dir} does not fit its config.yaml model section ({first_line})"
        ) from None
    return model.eval()

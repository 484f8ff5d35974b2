"""Embed a loader's images with the torch model (validation and test during training)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from retrieval.training.model.device import Precision


@torch.no_grad()
def embed_loader(
    model: nn.Module, loader: DataLoader, device: torch.device, precision: Precision, channels_last: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Return (embeddings float32 (N, D), label indices (N,)) in the loader's order."""
    was_training = model.training
    model.eval()
    chunks, labels = [], []
    for images, targets, _ in loader:
        images = images.to(device, non_blocking=True)
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=precision.dtype, enabled=precision.enabled):
            chunks.append(model(images).float().cpu())
        labels.append(targets)
    model.train(was_training)
    return torch.cat(chunks).numpy(), torch.cat(labels).numpy()

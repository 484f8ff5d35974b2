"""The GPU path of the embedder: with onnxruntime-gpu and an NVIDIA GPU, CUDA really runs the model.

onnxruntime-gpu lists ``CUDAExecutionProvider`` as available even where it cannot run and then
silently falls back to the CPU, so the test checks the providers of the created session
(``session.get_providers()``, kept as ``OnnxEmbedder.providers``) and that the CUDA embeddings match
the CPU ones. Skipped without a GPU (it never ran on the 2-core CPU machine of development).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from index_fixtures import make_image
from serving_fixtures import serving_client

from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder

CUDA = "CUDAExecutionProvider"
HAS_GPU = CUDA in ort.get_available_providers() and Path("/dev/nvidia0").exists()
pytestmark = pytest.mark.skipif(not HAS_GPU, reason="needs onnxruntime-gpu and an NVIDIA GPU")


def test_cuda_session_runs_on_the_gpu_and_matches_the_cpu(tiny_model_dir: Path) -> None:
    gpu = OnnxEmbedder(tiny_model_dir, providers="cuda")
    assert gpu.providers[0] == CUDA
    assert gpu._session.get_providers()[0] == CUDA
    assert OnnxEmbedder(tiny_model_dir).providers[0] == CUDA  # "auto" picks the GPU when one works
    images = [make_image(class_index, 0) for class_index in range(4)]
    cpu = OnnxEmbedder(tiny_model_dir, providers="cpu")
    np.testing.assert_allclose(gpu.embed_images(images), cpu.embed_images(images), atol=1e-4)


def test_service_embeds_on_the_gpu(tiny_index_template: Path) -> None:
    with serving_client(tiny_index_template) as client:
        assert client.app.state.services.state.current().embedder.providers[0] == CUDA

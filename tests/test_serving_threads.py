"""How the service shares the cores: faiss on ``search_threads`` in the store thread only, and
onnxruntime's threads not spinning (``onnx_spin_wait``), without changing any result."""

from __future__ import annotations

import io

import faiss
import numpy as np
import pytest
from PIL import Image
from serving_fixtures import GALLERY_SIZE, query_png, serving_client

from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder

SPINNING = "session.intra_op.allow_spinning"


@pytest.mark.parametrize("search_threads", [1, 2])
def test_store_thread_uses_search_threads(tiny_index_template, search_threads: int) -> None:
    before = faiss.omp_get_max_threads()
    with serving_client(tiny_index_template, search_threads=search_threads) as client:
        state = client.app.state.services.state
        in_store_thread = client.portal.call(state.read, lambda snapshot: faiss.omp_get_max_threads())
        response = client.post("/search?k=5", files={"image": ("q.png", query_png(), "image/png")})
    assert in_store_thread == search_threads
    assert faiss.omp_get_max_threads() == before  # OpenMP's setting is per thread: the caller's is untouched
    assert response.status_code == 200 and len(response.json()["results"]) == min(5, GALLERY_SIZE)


def test_service_embedder_does_not_spin_and_embeds_the_same(tiny_index_template) -> None:
    with serving_client(tiny_index_template) as client:
        served = client.app.state.services.state.current().embedder
        embedded = client.post("/embed", files={"image": ("q.png", query_png(), "image/png")}).json()["embedding"]
        served_spinning = served._session.get_session_options().get_session_config_entry(SPINNING)  # closed on exit
    spinning = OnnxEmbedder(tiny_index_template / "model", threads=served.threads)
    assert served_spinning == "0"
    assert spinning._session.get_session_options().get_session_config_entry(SPINNING) == "1"
    expected = spinning.embed_images([Image.open(io.BytesIO(query_png()))])[0]
    np.testing.assert_array_equal(np.asarray(embedded, dtype=np.float32), expected)

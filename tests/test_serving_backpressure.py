"""Backpressure: the images waiting for decoding and embedding are bounded (``max_queued_images``); past
the bound a request is refused at once with 503 and Retry-After instead of queueing until its timeout.
A per-client token bucket (``rate_limit_per_s``, ``rate_limit_burst``) answers 429 with Retry-After."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from serving_fixtures import query_png, running_server, serving_client

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.serving.settings import make_settings

SLOW_EMBED_S = 1.0
QUERY = query_png(1)
CLIENTS = 8


@pytest.fixture()
def slow_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every onnxruntime call takes SLOW_EMBED_S more, so that requests pile up."""
    original = OnnxEmbedder.embed_arrays

    def slow(self, batch):
        time.sleep(SLOW_EMBED_S)
        return original(self, batch)

    monkeypatch.setattr(OnnxEmbedder, "embed_arrays", slow)


def _search(base: str) -> tuple[int, float, dict[str, str]]:
    started = time.monotonic()
    answer = httpx.post(f"{base}/search", files={"image": ("q.png", QUERY, "image/png")}, timeout=60)
    return answer.status_code, time.monotonic() - started, dict(answer.headers)


def test_requests_past_the_queue_bound_are_refused_at_once(tiny_index_template: Path, slow_model: None) -> None:
    # one image per batch, so the queue drains at one image per SLOW_EMBED_S
    with running_server(tiny_index_template, max_queued_images=2, batch_max_size=1) as base:
        assert _search(base)[0] == 200  # warm (the first request imports decoders)
        with ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(lambda _: _search(base), range(CLIENTS)))
    accepted = [seconds for status, seconds, _ in answers if status == 200]
    refused = [(seconds, headers) for status, seconds, headers in answers if status == 503]
    assert len(accepted) + len(refused) == CLIENTS
    assert 2 <= len(accepted) < CLIENTS and refused
    assert all(headers["retry-after"] == "1" for _, headers in refused)
    assert all(headers["content-type"] == "application/problem+json" for _, headers in refused)
    assert max(seconds for seconds, _ in refused) < SLOW_EMBED_S  # not queued until a timeout


def test_without_pressure_every_request_is_served(tiny_index_template: Path, slow_model: None) -> None:
    with running_server(tiny_index_template, max_queued_images=CLIENTS) as base:
        with ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(lambda _: _search(base), range(CLIENTS)))
    assert [status for status, _, _ in answers] == [200] * CLIENTS


def test_a_client_over_its_rate_gets_429_with_retry_after(tiny_index_template: Path) -> None:
    with serving_client(tiny_index_template, rate_limit_per_s=0.5, rate_limit_burst=2) as client:
        statuses = [client.get("/items/1").status_code for _ in range(3)]
        assert statuses == [200, 200, 429]
        limited = client.get("/items/1")
        assert limited.status_code == 429 and limited.headers["content-type"] == "application/problem+json"
        assert 1 <= int(limited.headers["retry-after"]) <= 2
        assert "rate_limit_per_s" in limited.json()["detail"]
        assert client.get("/readyz").status_code == 200  # probes are never limited
        assert client.get("/healthz").status_code == 200


def test_the_bounds_are_validated_settings() -> None:
    with pytest.raises(ConfigError, match="max_queued_images"):
        make_settings(index_dir=".", max_queued_images=0)
    with pytest.raises(ConfigError, match="rate_limit_per_s"):
        make_settings(index_dir=".", rate_limit_per_s=0)


def test_at_the_bound_an_upload_is_refused_before_its_body_is_read(tiny_index_template: Path, slow_model: None) -> None:
    """The gate answers from the headers: even a body that parsing would refuse (text, a 415) gets the 503."""
    with running_server(tiny_index_template, max_queued_images=1) as base:
        assert _search(base)[0] == 200  # warm
        with ThreadPoolExecutor(1) as pool:
            busy = pool.submit(_search, base)  # holds the one place for SLOW_EMBED_S
            time.sleep(SLOW_EMBED_S / 3)
            refused = httpx.post(f"{base}/search", files={"image": ("a.txt", b"text", "text/plain")}, timeout=60)
            assert busy.result()[0] == 200
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "max_queued_images" in refused.json()["detail"]

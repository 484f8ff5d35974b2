"""Fixtures of the serving tests: a tiny real index (tiny ONNX model + generated gallery) and clients.

The model and gallery come from the index engineer's ``index_fixtures``; the index is
built with the real ``build_index``. Tests that add or remove items get their own copy.
"""

from __future__ import annotations

import io
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from index_fixtures import NUM_CLASSES, PER_CLASS, export_tiny_model, make_gallery, make_image
from launching import free_port
from PIL import Image

from retrieval.indexing.store.build.builder import build_index
from retrieval.serving.app import create_app
from retrieval.serving.settings import make_settings

API_KEY = "test-key-0123456789"
GALLERY_SIZE = NUM_CLASSES * PER_CLASS


def build_tiny_index(root: Path) -> Path:
    """Export the tiny model, write the generated gallery, build ``root/index`` with it."""
    model_dir = export_tiny_model(root / "export")
    records = make_gallery(root / "gallery")
    build_index(model_dir, records, root / "index", progress=False)
    return root / "index"


@pytest.fixture(scope="session")
def tiny_index_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per session; never modify it, copy it with ``fresh_index``."""
    return build_tiny_index(tmp_path_factory.mktemp("serving"))


@pytest.fixture()
def fresh_index(tiny_index_template: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny index that a test may add to and remove from."""
    return Path(shutil.copytree(tiny_index_template, tmp_path / "index"))


def image_bytes(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def query_png(class_index: int = 0, item: int = 99) -> bytes:
    """A new image of ``class_index`` that is not in the gallery."""
    return image_bytes(make_image(class_index, item))


def wait_ready(client: TestClient, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.get("/readyz").status_code == 200:
            return
        time.sleep(0.02)
    raise AssertionError(f"the service did not become ready: {client.get('/readyz').json()}")


@contextmanager
def serving_client(index_dir: Path, **settings: object) -> Iterator[TestClient]:
    """A TestClient of a fresh app on ``index_dir`` (lifespan run, index loaded)."""
    settings.setdefault("api_key", API_KEY)
    app = create_app(make_settings(index_dir=index_dir, **settings))
    with TestClient(app) as client:
        wait_ready(client)
        yield client


@contextmanager
def running_server(index_dir: Path, **settings: object) -> Iterator[str]:
    """A real uvicorn server on a free 127.0.0.1 port, in a thread; yields its base URL once ready."""
    import httpx
    import uvicorn

    settings.setdefault("api_key", API_KEY)
    app = create_app(make_settings(index_dir=index_dir, **settings))
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{config.port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        else:
            raise AssertionError(f"the server at {base} did not become ready")
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)

"""``retrieval serve``: the FastAPI search service under uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from retrieval.indexing.store.shared.manifest import load_index_manifest
from retrieval.serving.app import create_app
from retrieval.serving.settings import ServeSettings, settings_from_env


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
    app.command("serve")(serve)


def serve(
    index: Annotated[Path, typer.Option("--index", help="index directory written by `retrieval index build`")],
    host: Annotated[str, typer.Option(help="address to listen on (0.0.0.0 to accept other machines)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="worker processes; each loads its own model and index")] = 1,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="RETRIEVAL_API_KEY", help="key for POST/DELETE /items and /admin/reload (X-API-Key header)"
        ),
    ] = None,
    threads: Annotated[
        int | None, typer.Option(min=1, help="onnxruntime threads per worker (default: cores / workers)")
    ] = None,
) -> None:
    """Serve searches over HTTP, with a web page at / and the API documented at /docs."""
    load_index_manifest(index)  # fail now with one sentence, not later as a 503 from /readyz
    threads = threads or max(1, (os.cpu_count() or 1) // workers)
    settings = settings_from_env(index_dir=index.resolve(), api_key=api_key or None, threads=threads)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    typer.echo(f"web page: http://{shown}:{port}/   API docs: http://{shown}:{port}/docs")
    if workers == 1:
        uvicorn.run(create_app(settings), host=host, port=port, log_level="info")
        return
    _export_settings(settings)
    uvicorn.run("retrieval.serving.app:app_from_env", factory=True, host=host, port=port, workers=workers)


def _export_settings(settings: ServeSettings) -> None:
    """Worker processes import the app by name, so they get the settings through the environment."""
    os.environ["RETRIEVAL_INDEX_DIR"] = str(settings.index_dir)
    os.environ["RETRIEVAL_THREADS"] = str(settings.threads)
    if settings.api_key:
        os.environ["RETRIEVAL_API_KEY"] = settings.api_key

"""``retrieval serve``: the FastAPI search service under uvicorn."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from retrieval.indexing.common.errors import ConfigError
from retrieval.serving.settings import MIN_API_KEY_CHARS, ServeSettings, check_index_dir, settings_from_env


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
            envvar="RETRIEVAL_API_KEY",
            help=f"key for writes (POST/PUT/DELETE /items...) and /admin/reload (X-API-Key header); at least "
            f"{MIN_API_KEY_CHARS} characters (a shorter one stops the start); without it writes are refused. "
            "With a key, hits and items show only the file name in `path` (the server's folders stay private; "
            "RETRIEVAL_SHOW_PATHS=true shows full paths)",
        ),
    ] = None,
    threads: Annotated[
        int | None, typer.Option(min=1, help="onnxruntime threads per worker (default: cores / workers)")
    ] = None,
    decode_threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="images each worker decodes and preprocesses at once, the CPU beside onnxruntime's --threads "
            '(default 2; env RETRIEVAL_MAX_CONCURRENT_DECODES; docs/serving.md, "Planning for a GPU")',
        ),
    ] = None,
    verify_on_load: Annotated[
        bool,
        typer.Option(
            "--verify-on-load",
            help="check every file, vector and record as `retrieval index verify` does at each load and reload, "
            "refusing a damaged index (seconds per GB of index; env RETRIEVAL_VERIFY_ON_LOAD)",
        ),
    ] = False,
) -> None:
    """Serve searches over HTTP, with a web page at / and the API documented at /docs."""
    threads = threads or max(1, (os.cpu_count() or 1) // workers)
    settings = settings_from_env(  # a short key fails here, before anything loads
        index_dir=index.resolve(),
        api_key=api_key or None,
        threads=threads,
        max_concurrent_decodes=decode_threads,
        verify_on_load=verify_on_load or None,
    )
    check_index_dir(index)  # fail now with one sentence, not later as a 503 from /readyz
    check_port(host, port)  # before the model and index load, not as uvicorn's OSError after
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    typer.echo(f"web page: http://{shown}:{port}/   API docs: http://{shown}:{port}/docs")
    if settings.api_key and settings.show_paths is None:
        typer.echo("paths: an API key is set, so hits show file names only (RETRIEVAL_SHOW_PATHS=true: full paths)")
    typer.echo(f"loading the model and the index from {index} (the page answers once they are loaded) ...")
    from retrieval.serving.app import create_app  # FastAPI loads here: `serve --help` and its errors need none

    if workers == 1:
        uvicorn.run(create_app(settings), host=host, port=port, log_level="info")
        return
    _export_settings(settings)
    uvicorn.run("retrieval.serving.app:app_from_env", factory=True, host=host, port=port, workers=workers)


def check_port(host: str, port: int) -> None:
    """ConfigError, one sentence naming the port and --port, when ``host:port`` cannot be listened on.
    Bound the way uvicorn binds (SO_REUSEADDR), then released at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"port {port} on {host} is already in use by another program (another `retrieval serve`?); "
                    f"stop it, or choose a free port with --port, e.g. --port {port + 1}"
                ) from None
            raise ConfigError(f"cannot listen on {host}:{port} ({error.strerror}); choose --host or --port") from None


def _export_settings(settings: ServeSettings) -> None:
    """Worker processes import the app by name, so they get the settings through the environment."""
    os.environ["RETRIEVAL_INDEX_DIR"] = str(settings.index_dir)
    os.environ["RETRIEVAL_THREADS"] = str(settings.threads)
    os.environ["RETRIEVAL_MAX_CONCURRENT_DECODES"] = str(settings.max_concurrent_decodes)
    if settings.api_key:
        os.environ["RETRIEVAL_API_KEY"] = settings.api_key
    if settings.verify_on_load:
        os.environ["RETRIEVAL_VERIFY_ON_LOAD"] = "true"

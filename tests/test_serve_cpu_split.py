"""``retrieval serve``'s CPU split per worker: ``--threads`` for onnxruntime, ``--decode-threads`` for decoding and
preprocessing uploads (``max_concurrent_decodes``), in one worker and, through the environment, in several."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from launching import free_port
from typer.testing import CliRunner

from retrieval.cli.commands import serve_commands
from retrieval.cli.main import app


def _served(monkeypatch: pytest.MonkeyPatch, index: Path, *flags: str) -> dict:
    """What ``serve`` hands uvicorn (nothing is served): the app or factory and its keyword arguments."""
    seen: dict = {}
    monkeypatch.setattr(serve_commands.uvicorn, "run", lambda target, **kwargs: seen.update(target=target, **kwargs))
    for name in ("RETRIEVAL_THREADS", "RETRIEVAL_MAX_CONCURRENT_DECODES", "RETRIEVAL_INDEX_DIR"):
        monkeypatch.delenv(name, raising=False)  # restored after the test: serve exports them for workers
    port = str(free_port())
    result = CliRunner().invoke(app, ["serve", "--index", str(index), "--port", port, *flags])
    assert result.exit_code == 0, result.output
    return seen


def test_decode_threads_and_threads_reach_the_one_workers_settings(monkeypatch, tiny_index_template: Path) -> None:
    seen = _served(monkeypatch, tiny_index_template, "--threads", "3", "--decode-threads", "5")
    settings = seen["target"].state.services.settings
    assert (settings.threads, settings.max_concurrent_decodes) == (3, 5)


def test_several_workers_get_the_split_through_the_environment(monkeypatch, tiny_index_template: Path) -> None:
    seen = _served(monkeypatch, tiny_index_template, "--workers", "2", "--threads", "1", "--decode-threads", "4")
    assert seen["target"] == "retrieval.serving.app:app_from_env" and seen["workers"] == 2
    assert os.environ["RETRIEVAL_THREADS"] == "1" and os.environ["RETRIEVAL_MAX_CONCURRENT_DECODES"] == "4"


def test_decode_threads_default_to_the_setting(monkeypatch, tiny_index_template: Path) -> None:
    settings = _served(monkeypatch, tiny_index_template)["target"].state.services.settings
    assert settings.max_concurrent_decodes == 2

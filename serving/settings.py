"""The service's settings: one pydantic model, filled from the CLI or from ``RETRIEVAL_*`` env vars.

Environment variables exist so that ``uvicorn --workers N`` (which imports the app by
name in each worker process) and containers can configure the service without flags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest

ENV_PREFIX = "RETRIEVAL_"


MIN_API_KEY_CHARS = 8
"""The shortest API key the service starts with (a shorter one is a ConfigError at start)."""


class ServeSettings(BaseModel):
    """Everything the service needs to know; unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index_dir: Path = Field(description="index directory built by `retrieval index build` (holds model/ too)")
    api_key: str | None = Field(
        None,
        min_length=MIN_API_KEY_CHARS,
        description=f"required for writes (at least {MIN_API_KEY_CHARS} characters); writes are refused without it",
    )
    max_upload_bytes: int = Field(10 * 1024 * 1024, gt=0, description="larger uploads get 413")
    max_pixels: int = Field(40_000_000, gt=0, description="decompression-bomb limit: width x height")
    max_decode_mb: int = Field(
        400, ge=16, description="an upload whose decoding (estimated from its header) needs more memory gets 400"
    )
    max_concurrent_decodes: int = Field(
        2, ge=1, description="uploads decoded at once; memory of decoding <= this x max_decode_mb"
    )
    draft_decode: bool = Field(
        True,
        description="decode a JPEG query at 1/2, 1/4 or 1/8 scale while its shorter side still covers the model's "
        "resize (Pillow's draft): a 4032 x 3024 photo costs about a tenth of the CPU; off, queries are decoded "
        "at full size as `retrieval index build` decodes the gallery (docs/results.md, issue 45's cuts)",
    )
    region_resize: bool = Field(
        False,
        description="resize only the region of a query the centre crop keeps (less CPU; each pixel within one "
        "level of the whole resize); off, exactly torchvision's resize-then-crop",
    )
    k_max: int = Field(100, ge=1, description="largest k a client may ask for")
    max_search_images: int = Field(
        16, ge=1, description="images one POST /search may send (a batch search); more get 413"
    )
    batch_max_size: int = Field(16, ge=1, description="images embedded per onnxruntime call at most")
    batch_max_wait_ms: float = Field(4.0, ge=0, description="how long the first image waits for company")
    max_queued_images: int = Field(
        24,
        ge=1,
        description="images accepted for decoding and embedding at once (waiting or running); past it a request "
        "gets 503 with Retry-After at once instead of queueing until its timeout",
    )
    rate_limit_per_s: float | None = Field(
        None, gt=0, description="requests per second each client (IP address) may send on average; none = no limit"
    )
    rate_limit_burst: int = Field(20, ge=1, description="requests a client may send at once before its rate applies")
    cors_origins: list[str] = Field(default_factory=list, description="allowed CORS origins; empty = CORS off")
    request_timeout_s: float = Field(30.0, gt=0, description="requests running longer get 504")
    threads: int | None = Field(None, ge=1, description="onnxruntime intra-op threads; default = all cores")
    onnx_spin_wait: bool = Field(
        False,
        description="onnxruntime's intra-op threads spin between operators; off, they leave the cores to "
        "decoding and the event loop of the same service",
    )
    search_threads: int = Field(
        1,
        ge=1,
        description="faiss (OpenMP) threads of the store thread; the service searches one query at a time, "
        "where more threads gain little and their spin-waiting takes cores from onnxruntime",
    )
    malloc_arenas: int | None = Field(
        2,
        ge=1,
        description="glibc malloc arenas the process may create (serving/glibc_malloc.py: more fragment the heap "
        "as threads come and go with reloads); none = glibc's default of 8 per core",
    )
    thumbnail_px: int = Field(160, ge=16, le=1024, description="longest side of /items/{id}/thumbnail")
    max_files_per_upload: int = Field(64, ge=1, description="POST /items accepts at most this many images")
    verify_on_load: bool = Field(
        False,
        description="run `retrieval index verify`'s checks (every file's sha256, every vector and record) on each "
        "load and reload, refusing a damaged index; off, a load checks the manifest and the model copy only "
        "(docs/operations.md)",
    )
    max_vectors_per_request: int = Field(
        10_000, ge=1, description="POST /items as JSON accepts at most this many items (vectors)"
    )
    max_json_bytes: int = Field(
        64 * 1024 * 1024, gt=0, description="larger JSON bodies (vectors) get 413; 1,000 512-d vectors are about 11 MB"
    )
    show_paths: bool | None = Field(
        None,
        description="show the server's full image paths in hits and items (else only the file name); "
        "default: shown without an API key, hidden with one",
    )

    @property
    def shows_paths(self) -> bool:
        """Whether hits and items carry full paths (``show_paths``, by default: no API key set)."""
        return self.show_paths if self.show_paths is not None else self.api_key is None


_LIST_FIELDS = {"cors_origins"}


def settings_from_env(environ: Mapping[str, str] | None = None, **overrides: object) -> ServeSettings:
    """Build settings from ``RETRIEVAL_<FIELD>`` variables, then ``overrides`` (None values ignored)."""
    environ = os.environ if environ is None else environ
    values: dict[str, object] = {}
    for name in ServeSettings.model_fields:
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is not None and raw != "":
            values[name] = [part.strip() for part in raw.split(",") if part.strip()] if name in _LIST_FIELDS else raw
    values.update({key: value for key, value in overrides.items() if value is not None})
    return make_settings(**values)


def make_settings(**values: object) -> ServeSettings:
    """``ServeSettings(**values)`` with pydantic's errors turned into one ConfigError sentence."""
    try:
        return ServeSettings(**values)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "settings"
        raise ConfigError(
            f"serving setting '{key}' is invalid: {first['msg']} (env var {ENV_PREFIX}{key.upper()} or the CLI flag)."
        ) from None


def check_index_dir(index_dir: Path) -> None:
    """An index directory the service can load, or a ``DataError`` naming what is wrong (``retrieval serve``
    asks before it starts, so that a wrong path is one sentence, not a 503 from ``/readyz`` later)."""
    load_index_manifest(index_dir)

"""A backbone's weights file from the Hugging Face hub, downloaded by huggingface_hub on the user's say-so.

The policy (which repository, the consent, the cache folder) is ``training.config.hub_access``'s. Here:
a copy already in the cache is used without any network access; otherwise, with consent, the file's size
is asked first (a HEAD request, ``get_hf_file_metadata``) and logged, then ``hf_hub_download`` fetches it
into the cache with its progress bar, and resumes a dropped connection where it stopped (an HTTP Range
request appending to the same partial file, up to 5 times in a run). huggingface_hub keeps a partial file
per process and removes it when the run fails (huggingface_hub PR #4228), so a killed run starts the file
again. Every weights file is checked against its checksum before use: the hub's ETag of a Git LFS file is
its sha256, the cache names the file by it, and a file that does not match is deleted.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.hub_access import (
    API_CONSENT,
    HUB_FILES,
    HubAccess,
    cached_hub_file,
    consent_needed,
    hub_repo,
)

log = logging.getLogger(__name__)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_CHUNK = 1 << 20


def hub_weights_file(backbone: str, access: HubAccess) -> Path:
    """``backbone``'s weights file in the cache, downloaded first when allowed; ConfigError when it is not cached
    and may not (or cannot) be downloaded, or when it does not match its checksum."""
    repo = hub_repo(backbone)
    cached = cached_hub_file(repo, access.cache_dir)
    if cached is not None:
        return verified(Path(cached), f"{repo}/{Path(cached).name}")
    if not access.allow_download:
        raise ConfigError(consent_needed(backbone, access, f"retrieval train ... --allow-download` or `{API_CONSENT}"))
    return _download(repo, access.cache_dir)


def _download(repo: str, cache_dir: str | None) -> Path:
    """The first of ``HUB_FILES`` that ``repo`` has, downloaded into the cache and verified."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError

    if constants.is_offline_mode():
        raise ConfigError(f"HF_HUB_OFFLINE is set and the weights of {repo} are not in the cache: unset it to download")
    for filename in HUB_FILES:
        try:
            metadata = get_hf_file_metadata(hf_hub_url(repo, filename))
        except EntryNotFoundError:
            continue
        except Exception as error:  # the network fails in many types: httpx's, huggingface_hub's, OSError
            raise _unreachable(repo, filename, error) from None
        where = cache_dir or constants.HF_HUB_CACHE
        log.info(
            "downloading %s/%s (%s) from %s into %s", repo, filename, _size(metadata.size), constants.ENDPOINT, where
        )
        try:
            path = hf_hub_download(repo, filename, cache_dir=cache_dir)
        except Exception as error:
            raise _unreachable(repo, filename, error) from None
        return verified(Path(path), f"{repo}/{filename}", metadata.etag)
    raise ConfigError(f"{repo} on the Hugging Face hub has no weights file ({' or '.join(HUB_FILES)})")


def _unreachable(repo: str, filename: str, error: Exception) -> ConfigError:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return ConfigError(
        f"cannot download {repo}/{filename} from the Hugging Face hub: {type(error).__name__} {first_line}"
    )


def _size(size: int | None) -> str:
    return "size unknown" if size is None else f"{size / 1e6:.1f} MB"


def verified(path: Path, label: str, etag: str | None = None) -> Path:
    """``path`` when its content matches its checksum: ``etag`` (the hub's), else the name of the cache's blob
    it links to; a file whose ETag is no checksum passes. A mismatch deletes the file (ConfigError)."""
    blob = path.resolve()
    expected = (etag or blob.name).lower()
    actual = _checksum(blob, expected)
    if actual is None or actual == expected:
        return path
    blob.unlink(missing_ok=True)
    path.unlink(missing_ok=True)
    raise ConfigError(
        f"{label} does not match its checksum ({actual[:12]}... instead of {expected[:12]}...), so it was deleted; "
        "run the command again to download it again"
    )


def _checksum(blob: Path, expected: str) -> str | None:
    """The sha256 of ``blob`` when ``expected`` is one, its Git blob sha1 when ``expected`` is one, else None."""
    if _SHA256.match(expected):
        digest = hashlib.sha256()
    elif _GIT_SHA1.match(expected):
        digest = hashlib.sha1(f"blob {blob.stat().st_size}\0".encode())
    else:
        return None
    with blob.open("rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()

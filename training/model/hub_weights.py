"""A backbone's weights file from the Hugging Face hub, downloaded with huggingface_hub on the user's say-so.

The policy (which repository, the consent, the cache folder) is ``training.config.hub_access``'s. Here:
a copy already in the cache is used without any network access; otherwise, with consent, the file's size
is asked first (a HEAD request, ``get_hf_file_metadata``) and logged, then the file is fetched into the
cache in huggingface_hub's layout, with its progress bar and a partial file that outlives the process.

huggingface_hub alone resumes only within one process: ``hf_hub_download`` writes to a partial file named
per process (``blobs/<etag>.<random>.incomplete``, huggingface_hub PR #4228), deletes it when the download
fails, and leaves it behind, never read again, when the process is killed. So the bytes are fetched by its
``http_get`` (streaming, progress bar, up to 5 in-run resumes of a dropped connection) into
``blobs/<etag>.incomplete``, appending to what an earlier run left there with an HTTP Range request, under
the lock ``hf_hub_download`` takes for that blob; the complete file is checked and renamed to
``blobs/<etag>``, and ``hf_hub_download`` then only links it into the snapshot (one more HEAD request), so
offline use of the cached copy is huggingface_hub's own. Every weights file is checked against its checksum
before use: the hub's ETag of a Git LFS file is its sha256 (a Git blob sha1 for a small file), the cache names
the file by it, and a file that does not match is deleted.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.hub_access import (
    ALLOW_ENV,
    API_CONSENT,
    HubAccess,
    cached_hub_file,
    consent_needed,
    hub_files,
    hub_repo,
)

if TYPE_CHECKING:
    from huggingface_hub import HfFileMetadata

log = logging.getLogger(__name__)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_CHUNK = 1 << 20


def hub_weights_file(backbone: str, access: HubAccess) -> Path:
    """``backbone``'s weights file in the cache, downloaded first when allowed; ConfigError when it is not cached
    and may not (or cannot) be downloaded, or when it does not match its checksum."""
    repo, files = hub_repo(backbone), hub_files(backbone)
    cached = cached_hub_file(repo, access.cache_dir, files)
    if cached is not None:
        return verified(Path(cached), f"{repo}/{Path(cached).name}")
    if not access.allow_download:
        raise ConfigError(consent_needed(backbone, access, f"retrieval train ... --allow-download` or `{API_CONSENT}"))
    return _download(repo, access.cache_dir, files)


def hub_side_file(backbone: str, filename: str, access: HubAccess) -> Path:
    """Another file of ``backbone``'s hub repository (SigLIP's ``tokenizer.json``) in the cache, downloaded first
    when allowed, through the same checked path as the weights; ConfigError as ``hub_weights_file``."""
    repo = hub_repo(backbone)
    cached = cached_hub_file(repo, access.cache_dir, (filename,))
    if cached is not None:
        return verified(Path(cached), f"{repo}/{filename}")
    if not access.allow_download:
        raise ConfigError(
            f"{repo}/{filename} is not in the weights cache and downloading needs your consent: run the command "
            f"again with --allow-download (or set {ALLOW_ENV}=1)"
        )
    return _download(repo, access.cache_dir, (filename,))


def _download(repo: str, cache_dir: str | None, files: tuple[str, ...]) -> Path:
    """The first of ``files`` that ``repo`` has, downloaded into the cache and verified."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError

    if constants.is_offline_mode():
        raise ConfigError(f"HF_HUB_OFFLINE is set and the weights of {repo} are not in the cache: unset it to download")
    for filename in files:
        try:
            metadata = get_hf_file_metadata(hf_hub_url(repo, filename))
        except EntryNotFoundError:
            continue
        except Exception as error:  # the network fails in many types: httpx's, huggingface_hub's, OSError
            raise _unreachable(repo, filename, error) from None
        cache = Path(cache_dir or constants.HF_HUB_CACHE)
        log.info(
            "downloading %s/%s (%s) from %s into %s", repo, filename, _size(metadata.size), constants.ENDPOINT, cache
        )
        try:
            fetched = _fetch_blob(repo, filename, metadata, cache)
            path = Path(hf_hub_download(repo, filename, cache_dir=cache_dir))  # the blob is there: it links it
        except ConfigError:
            raise
        except Exception as error:
            raise _unreachable(repo, filename, error, _kept(cache, repo, metadata.etag)) from None
        return path if fetched else verified(path, f"{repo}/{filename}", metadata.etag)
    raise ConfigError(f"{repo} on the Hugging Face hub has no {' or '.join(files)}")


def _fetch_blob(repo: str, filename: str, metadata: HfFileMetadata, cache: Path) -> bool:
    """``blobs/<etag>`` of ``repo`` in ``cache``, fetched through ``blobs/<etag>.incomplete`` (resumed where an
    earlier run stopped) and verified; False when there is nothing to fetch here (the blob is already there,
    or the hub's answer lacks the ETag or commit that ``hf_hub_download`` will then refuse in its own words)."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.file_download import http_get, repo_folder_name
    from huggingface_hub.utils import WeakFileLock, build_hf_headers

    if not metadata.etag or not metadata.commit_hash:
        return False
    folder = repo_folder_name(repo_id=repo, repo_type="model")
    blob = _blob(cache, repo, metadata.etag)
    blob.parent.mkdir(parents=True, exist_ok=True)
    (cache / ".locks" / folder).mkdir(parents=True, exist_ok=True)
    with WeakFileLock(cache / ".locks" / folder / f"{metadata.etag}.lock"):  # hf_hub_download's lock for it
        if blob.exists():
            return False
        partial = _partial_file(blob, metadata.size)
        with partial.open("ab") as file:
            if file.tell():
                log.info("resuming %s/%s at %s", repo, filename, _size(file.tell()))
            url = hf_hub_url(repo, filename, revision=metadata.commit_hash)  # the version the HEAD saw
            headers = build_hf_headers()
            http_get(url, file, resume_size=file.tell(), headers=headers, expected_size=metadata.size)
        verified(partial, f"{repo}/{filename}", metadata.etag)
        partial.replace(blob)
    return True


def _blob(cache: Path, repo: str, etag: str) -> Path:
    """Where huggingface_hub's cache keeps the file whose ETag is ``etag``."""
    from huggingface_hub.file_download import repo_folder_name

    return cache / repo_folder_name(repo_id=repo, repo_type="model") / "blobs" / etag


def _kept(cache: Path, repo: str, etag: str | None) -> Path | None:
    """The partial file a failed download left with some bytes in it, or None."""
    partial = _blob(cache, repo, etag).with_name(f"{etag}.incomplete") if etag else None
    return partial if partial is not None and partial.is_file() and partial.stat().st_size else None


def _partial_file(blob: Path, size: int | None) -> Path:
    """``blob``'s partial file, ``<etag>.incomplete``: the one an earlier run left, else the longest of the
    per-process partial files a killed ``hf_hub_download`` left (the others are deleted); emptied when it is
    longer than the file."""
    partial = blob.with_name(f"{blob.name}.incomplete")
    leftovers = sorted(blob.parent.glob(f"{blob.name}.*.incomplete"), key=lambda path: path.stat().st_size)
    if leftovers and not partial.exists():
        leftovers.pop().replace(partial)
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)
    if size is not None and partial.exists() and partial.stat().st_size > size:
        partial.unlink()
    return partial


def _unreachable(repo: str, filename: str, error: Exception, kept: Path | None = None) -> ConfigError:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    resume = (
        f"; the {_size(kept.stat().st_size)} fetched are kept in {kept}: run the command again to resume"
        if kept
        else ""
    )
    return ConfigError(
        f"cannot download {repo}/{filename} from the Hugging Face hub: {type(error).__name__} {first_line}{resume}"
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

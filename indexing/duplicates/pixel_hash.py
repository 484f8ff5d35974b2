"""Exact copies: images whose decoded pixels are identical, whatever their file format or metadata.

The digest is SHA-256 of the upright 8-bit RGB pixels (``image_io.open_rgb``) and their size, so a PNG
and a lossless re-save of it, or the same JPEG under two names, are one image; a re-encoded JPEG is not
(its pixels change), and is a near copy instead. Decoding runs on a few threads (Pillow releases the GIL).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.image_io import open_rgb

HASH_THREADS = 2


def pixel_digest(path: Path) -> str | None:
    """SHA-256 of the decoded pixels of ``path``, or None when it cannot be read."""
    try:
        image = open_rgb(Path(path))
    except DataError:
        return None
    digest = hashlib.sha256(f"{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


def pixel_digests(paths: Sequence[Path], *, progress: bool = True, threads: int = HASH_THREADS) -> list[str | None]:
    """``pixel_digest`` of each path, in order."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = pool.map(pixel_digest, paths)
        return list(tqdm(results, total=len(paths), desc="pixel hashes", unit="img", disable=not progress))


def exact_copy_sets(digests: Sequence[str | None]) -> list[list[int]]:
    """Positions that share a digest, two or more, in order of their first position (unreadable ones
    never match)."""
    positions: dict[str, list[int]] = defaultdict(list)
    for position, digest in enumerate(digests):
        if digest is not None:
            positions[digest].append(position)
    return [members for members in positions.values() if len(members) > 1]

"""Look after an index directory: what it holds now (``index_info``: an update killed after its commit
is finished first, so the counts are the committed ones)."""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.common.artifact_names import ITEMS_DB_NAME
from retrieval.indexing.store.backends import FILES, open_store
from retrieval.indexing.store.shared.items_db import ItemsDb
from retrieval.indexing.store.shared.manifest import IndexManifest, load_index_manifest


def index_info(index_dir: Path) -> IndexManifest:
    """The manifest of ``index_dir`` as committed: when an update was killed between its commit and its
    manifest (the item table is ahead), the index is opened, which finishes the update and saves it."""
    manifest = load_index_manifest(Path(index_dir))
    if manifest.backend != FILES:
        return manifest
    db = ItemsDb.open(Path(index_dir) / ITEMS_DB_NAME)
    try:
        committed = db.generation
    finally:
        db.close()
    if committed == manifest.generation:
        return manifest
    with open_store(Path(index_dir)) as store:  # repairs (or, read-only, repairs in memory)
        return store.manifest

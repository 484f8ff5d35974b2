"""Index directories on disk: ``manifest`` (``manifest.json``), ``faiss_kinds`` (registry of float
and binary faiss index kinds), ``faiss_gpu`` (GPU search when available), ``items_db`` (the SQLite
item table), ``index_store`` (open, search, add, remove) and ``builder`` (build a directory
atomically from a model and records)."""

"""Index directories on disk: ``manifest`` (``manifest.json``), ``faiss_kinds`` (registry of float
and binary faiss index kinds), ``faiss_gpu`` (GPU search when available), ``items_db`` (the SQLite
item table), ``item_filter`` (item metadata and the search filter), ``filtered_search`` (search
within a filter's matches), ``index_store`` (open, search, add, remove), ``item_search`` (search ->
ranked items) and ``builder`` (build a directory atomically from a model and records)."""

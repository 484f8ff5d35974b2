"""Index directories on disk: ``manifest`` (``manifest.json``), ``faiss_kinds`` (registry of float
and binary faiss index kinds), ``faiss_gpu`` (GPU search when available), ``items_db`` (the SQLite
item table), ``item_filter`` (item metadata and the search filter), ``filtered_search`` (search
within a filter's matches), ``index_store`` (open, search, add, remove), ``item_search`` (search ->
ranked items) and ``builder`` (build a directory atomically from a model and records). The milvus
backend: ``open_store`` (open any index by its manifest's backend), ``milvus_store`` (the same
interface over a Milvus collection), ``milvus_build``, ``milvus_client``, ``milvus_rows``,
``milvus_filter``. Segments of a files index: ``segments`` (base + deltas + tombstones on disk),
``segment_files``, ``segment_set`` (loaded segments, id -> row -> segment), ``segment_search``
(per-segment search and merge), ``store_updates`` (add, remove, compact), ``segment_merge`` and
``compaction`` (when and what to compact)."""

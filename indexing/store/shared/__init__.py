"""What both backends (``files/``, ``milvus/``) and the builds share.

``store_protocol`` (``Store``: the one interface of an opened index) and ``store_base``
(``StoreBase``: the top-down search and the item lookups both stores inherit), with ``rerank`` (a
binary shortlist re-ranked by float), ``postprocessed_search`` (a search after alpha-QE or k-reciprocal
re-ranking, for ``query.candidates``), ``search_settings`` (``SearchSettings``: how to search, one value that every
entry point builds and every layer reads), ``store_checks`` (query and added-item checks) and ``idempotency``
(a retried add under an Idempotency-Key: replayed for the same request, refused for another). The index
directory: ``index_directory.manifest`` (``manifest.json``), ``index_directory.file_checksums`` (the sha256 of every file, recorded in
the manifest), ``index_directory.compaction`` (its policy, and what a compaction did),
``items.items_db`` (``items.sqlite`` and ``Item``; ``items.item_paths``: image paths inside the index stored
relative to it), ``items.item_filter`` (item metadata and the search filter),
``items.filter_conditions`` (the filter language's operators), ``items.filter_sql`` (a filter as SQL),
``index_directory.write_lock`` (one writer per directory) and ``index_directory.index_dir`` (writing a new directory: the checks,
the model copy, the staged swap).
"""

"""The files backend: faiss indexes + SQLite + stored embeddings in the index directory.

``index_store`` (``IndexStore``: open, repair, search; one class that holds its writing component) with
``store_updates`` (``StoreUpdates``, that component: add, remove, compact).
Segments: ``segment_storage.segments`` (an immutable base + append-only deltas + tombstones), ``segment_storage.segment_files``
(each segment's three files), ``segment_storage.segment_set`` (the loaded segments, id -> row -> segment),
``segment_storage.segment_merge`` (the files of a compaction) and ``segment_storage.compaction_plan`` (when and what to compact).
Searching: ``faiss_search.segment_searcher`` (one segment, one kind: tombstones, filters, GPU, exact fallback),
``faiss_search.filtered_search`` (faiss id selectors and exact search over stored vectors) and
``faiss_search.faiss_gpu`` (GPU copies when faiss sees a GPU); ``faiss_kinds`` (the registry of float and binary
index kinds) is below both folders: segments build with it, searches read it.
Writing a new index: ``files_target`` (``FilesTarget``). A DBA index (``--dba N``): ``raw_vectors`` (the
raw embeddings beside the augmented ones) and ``dba_updates`` (adds augment their items; a full
compaction re-augments all).
"""

"""Indexes: one ``Store`` interface, two backends, and the builds that write them.

``shared/`` (what both backends use: the manifest, the item table and filter, the write lock, the
``Store`` protocol and ``StoreBase``) <- ``files/`` (faiss + SQLite in the index directory: segments,
compaction, ``IndexStore``) and ``milvus/`` (the items in a Milvus collection: ``MilvusStore``),
neither importing the other <- ``backends`` (the registry of backends: the one place that picks
one, ``open_store``, ``index_target``), and ``stored_embeddings`` (an index's embeddings as a table) <- ``build/``
(``build_index``, shards and their merge) and ``maintenance/`` (snapshots, verification, and a model
upgrade into a new generation with its switch and rollback), neither importing the other.
"""

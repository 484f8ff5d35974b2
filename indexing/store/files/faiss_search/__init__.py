"""Searching the files backend's segments with faiss:
``segment_searcher`` (one segment, one kind: tombstones, filters, GPU, exact fallback), ``filtered_search``
(faiss id selectors and exact search over stored vectors) and ``faiss_gpu`` (GPU copies when faiss sees a
GPU); the kinds' registry is ``files.faiss_kinds``.
"""

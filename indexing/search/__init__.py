"""Nearest-neighbour search primitives: ``results`` (the one ``SearchResults`` type and its operations:
empty, from faiss output, without ids, merge top-k, pad), ``kinds`` (``SearchKind``: float or
binary, its metric and scores), ``binary`` (sign binarisation into packed codes, Hamming <->
similarity), ``knn`` (exact chunked k-NN), ``fast_transpose`` (the block transpose of same-set
k-NN), ``postprocess`` (alpha-QE, alpha-DBA and k-reciprocal re-ranking over embeddings and results)
and ``postprocess_params`` (the methods' names and parameters). Copies have their own folder:
``indexing.duplicates``."""

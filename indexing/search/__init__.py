"""Nearest-neighbour search primitives: ``results`` (the one ``SearchResults`` type and its operations:
empty, from faiss output, without ids, merge top-k, pad), ``kinds`` (``SearchKind``: float or
binary, its metric and scores), ``binary`` (sign binarisation into packed codes, Hamming <->
similarity), ``knn`` (exact chunked k-NN) and ``fast_transpose`` (the block transpose of same-set
k-NN)."""

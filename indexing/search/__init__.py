"""Nearest-neighbour search primitives: ``results`` (the one ``SearchResults`` type), ``binary``
(sign binarisation into packed codes, Hamming <-> similarity) and ``knn`` (exact chunked k-NN)."""

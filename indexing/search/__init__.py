"""Nearest-neighbour search primitives: ``results`` (the one ``SearchResults`` type and its operations:
empty, from faiss output, without ids, merge top-k, pad), ``kinds`` (``SearchKind``: float or
binary, its metric and scores), ``binary`` (sign binarisation into packed codes, Hamming <->
similarity), ``knn`` (exact chunked k-NN), ``fast_transpose`` (the block transpose of same-set
k-NN), ``postprocess`` (alpha-QE, alpha-DBA and k-reciprocal re-ranking over embeddings and results)
and ``postprocess_params`` (the methods' names and parameters); ``copy_join`` (near-copy pairs of a
whole collection: a self-join on binary codes re-checked in float), ``copy_groups`` (their connected
components), ``copy_thresholds`` (the thresholds a run uses: measured or ``--threshold``), ``copy_calibration`` (a model's copy threshold, measured on synthetic copies) and ``copy_verifier`` (the pixel check
that keeps copies and drops look-alikes among the candidate pairs)."""

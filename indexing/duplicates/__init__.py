"""Copies, in one folder: exact copies by their pixels, near copies by the model's embeddings, verified by
their pixels, grouped, and the threshold that tells a copy from a look-alike.

``pixel_hash`` (exact copies: a hash of the decoded pixels), ``copy_signature`` (the small grayscale
thumbnail, three framings, that tells a copy from a look-alike), ``copy_join`` (near-copy pairs of a whole
collection: a self-join on binary codes re-checked in float), ``copy_verifier`` (the pixel check that keeps
copies and drops look-alikes among the candidate pairs), ``copy_groups`` (their connected components, and
``collapse_copies`` for a ranked list), ``copy_thresholds`` (the thresholds a run uses: measured or
``--threshold``), ``copy_threshold_measure`` (a model's copy threshold, measured on synthetic copies) <-
``dataset_copies`` (the copies in a dataset: counts, ``duplicates.csv``, ``duplicates.png``) <- the use
cases ``dataset_duplicates`` (``find_dataset_duplicates``, ``find_exact_copies``) and ``index_duplicates``
(``find_index_duplicates``, ``store_duplicate_groups``, ``item_duplicates``: copies in a gallery).
Elsewhere: the record of the measured threshold in ``model.json`` (``exported_model.copy_threshold``), the
``collapse_duplicates`` result step (``query.steps``) and, with torch, ``training.export.copy_threshold_export``.
"""

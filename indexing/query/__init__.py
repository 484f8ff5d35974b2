"""A search after its query vectors: the ``Query`` value, the candidates and the one chain of result steps.

``query`` (``Query``: an image, a text, a vector, a stored item by id or key; ``usecases.query_vectors``
turns each into vectors) and ``model_traits`` (the model's calibration and copy threshold, read once per
loaded model) <- ``steps/`` (one module per result step, and their interface) and ``candidates`` (the
store's search, plain or post-processed: qe, kreciprocal, rerank) <- ``chain`` (``RESULT_STEPS`` in order,
``ranked_pages``: candidates then steps; ``filter_warnings``).
"""

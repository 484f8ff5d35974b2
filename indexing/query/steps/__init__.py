"""The result steps: each option that changes a search's hits, one ``ResultStep`` per module.

``step`` (the interface: ``HitPage``, the one hits type; ``StepContext``; ``ResultStep``) <-
``by_examples`` (a search by positive and negative examples: the examples left out, ``best_score``
re-scoring), ``collapse_duplicates`` (one hit per group of copies), ``diversity`` (MMR), ``group_by`` (the best
``k`` groups of a label or metadata key), ``page`` (``offset`` and ``k``), ``min_score``,
``probability`` (each hit's calibrated probability, and the ``min_probability`` cut), ``cutoff``
(``cutoff=auto``: the page's best expected-F1 prefix). ``query.chain`` runs
them in order.
"""

"""The result steps: each option that changes a search's hits, one ``ResultStep`` per module.

``step`` (the interface: ``HitPage``, the one hits type; ``StepContext``; ``ResultStep``) <-
``collapse_duplicates`` (one hit per group of copies), ``page`` (``offset`` and ``k``), ``min_score``,
``probability`` (each hit's calibrated probability, and the ``min_probability`` cut). ``query.chain`` runs
them in order.
"""

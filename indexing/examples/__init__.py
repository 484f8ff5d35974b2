"""Search by examples, in groups, with diversity: the pure functions (numpy, no index, no torch) behind the
``positive``/``negative`` query kind and the ``group_by`` and ``diversity`` result steps.

``similarity`` (a block of similarities of queries to items: inner products of float vectors, or
``1 - 2 * hamming / bits`` of packed binary codes) <- ``strategies`` (examples -> the vectors searched for
candidates and the candidates' scores: ``average_vector`` (Qdrant's formula) and ``best_score`` (Qdrant's),
one registry of their names) <- ``grouping`` (the best ``k`` groups of a ranked candidate
list, fetching more until ``k`` groups are found or the index is exhausted: Milvus's strict ``group_by``)
and ``diversity`` (maximal marginal relevance over the first candidates); ``example_search`` (one search by
examples over any index given as two callables: the strategy's vectors searched, the examples left out, the
candidates re-scored).
"""

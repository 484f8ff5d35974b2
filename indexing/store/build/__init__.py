"""Writing whole indexes: ``builder`` (``build_index``: embed a dataset and write it through a target),
``shards`` (one shard of a gallery embedded by an independent job) and ``shard_merge`` (N shards into
the index one build would write)."""

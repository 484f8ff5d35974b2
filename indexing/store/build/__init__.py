"""Writing indexes from a model and a dataset, through a backend's target (``store.backends``).

``builder`` (``build_index``: embed the records, write the index), ``shards`` (``build_shard``: one
shard I of N embedded by its own job) and ``shard_merge`` (``merge_shards``: N shards -> the index
one unsharded build writes).
"""

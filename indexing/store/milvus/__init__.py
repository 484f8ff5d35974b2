"""The Milvus backend: the items of an index in a Milvus collection (a server, or milvus-lite's file).

``milvus_store`` (``MilvusStore``: the ``Store`` interface over pymilvus), ``milvus_build``
(``MilvusTarget``: writing a new index into a collection), ``milvus_client`` (connecting, the
schemas, one error for a failed call), ``milvus_rows`` (items <-> rows, the id counter, idempotency
records) and ``milvus_filter`` (``ItemFilter`` as a Milvus expression).
"""

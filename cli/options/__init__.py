"""Options declared once and shared by several commands: ``config_options``
(options that stand for config keys, ``--epochs`` is ``trainer.epochs``), ``train_options`` (what ``train``
and ``study`` share), ``backend_options`` (``--backend`` and its Milvus settings), ``index_options``
(what the index commands share) and ``search_options`` (``retrieval search``'s, one line each in its signature).
"""

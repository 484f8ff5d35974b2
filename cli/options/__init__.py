"""Options declared once, as typer ``Annotated`` aliases, so each command's signature is one line per option:
``config_options`` (options that stand for config keys, ``--epochs`` is ``trainer.epochs``), ``train_options``
(what ``train`` and ``study`` share, and ``train``'s own), ``study_options`` (``study``'s own),
``backend_options`` (``--backend`` and its Milvus settings), ``index_options`` (what the index commands share),
``build_options`` (``index build``'s own), ``search_options`` (``retrieval search``'s), ``eval_options``
(``retrieval eval``'s) and ``export_options`` (``retrieval export``'s, with its choices).
"""

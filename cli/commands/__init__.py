"""One module per stage of the ``retrieval`` command, imported when the command
is named (``command_registry``): ``data_commands``, ``train_commands`` (``train``, ``losses``),
``backbone_commands`` (``backbones``), ``study_commands``, ``export_commands``, ``index_commands`` (``index
build|info|add|remove|compact|duplicates``) with ``shard_commands`` (``--shard``, ``index merge``) and
``maintenance_commands`` (``index snapshot|verify|rebuild|switch|rollback``), ``search_commands``,
``embed_commands``, ``eval_commands`` and ``serve_commands``. They parse and print; the work is in
``retrieval.indexing.usecases`` and ``retrieval.training``.
"""

"""The ``retrieval`` command: argument parsing and printing only; the work is in
``retrieval.indexing.usecases`` (no torch) and ``retrieval.training`` (torch, loaded lazily).

``main`` (the typer app; ``thread_env`` sets thread waiting before numpy loads, ``help_display``
shows flags as flags) loads each stage's commands when one is named, through ``command_registry`` (the
command -> module table, so ``--help`` and a failing argument import nothing heavy): ``commands.data_commands``, ``commands.train_commands`` (with
``options.config_options``: options that stand for config keys, and ``options.train_options``: the options ``train``
and ``study`` share, each declared once), ``commands.backbone_commands`` (``retrieval backbones``), ``commands.study_commands``, ``commands.export_commands``,
``index_group`` (the ``index`` group, whose sub-commands load when named), ``commands.index_commands``
(``index build|info|add|remove|compact``, with ``commands.shard_commands`` for ``--shard``
and ``index merge``, ``commands.maintenance_commands`` for ``index snapshot|verify|rebuild|switch|rollback``,
``options.backend_options`` for ``--backend`` and ``options.index_options``, the options index commands share), ``commands.search_commands`` (printed by
``search_output``), ``commands.embed_commands``, ``commands.eval_commands`` (the starting backbone's
columns computed by ``retrieval.training.run.measures.reference_columns``, loaded with torch when asked) and ``commands.serve_commands``; ``activity`` spins on the terminal while a
silent phase (torch, a model, an index) loads.
"""

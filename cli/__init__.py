"""The ``retrieval`` command: argument parsing and printing only; the work is in
``retrieval.indexing.api`` (no torch) and ``retrieval.training`` (torch, loaded lazily).

``main`` (the typer app; ``thread_env`` sets thread waiting before numpy loads, ``help_display``
shows flags as flags) loads each stage's commands when one is named, through ``command_registry`` (the
command -> module table, so ``--help`` and a failing argument import nothing heavy): ``data_commands``, ``train_commands`` (with
``config_options``: options that stand for config keys, and ``train_options``: the options ``train``
and ``study`` share, each declared once), ``backbone_commands`` (``retrieval backbones``), ``study_commands``, ``export_commands``,
``index_group`` (the ``index`` group, whose sub-commands load when named), ``index_commands``
(``index build|info|add|remove|compact``, with ``shard_commands`` for ``--shard``
and ``index merge``, ``maintenance_commands`` for ``index snapshot|verify|rebuild|switch|rollback``,
``backend_options`` for ``--backend`` and ``index_options``, the options index commands share), ``search_commands`` (printed by
``search_output``), ``embed_commands``, ``eval_commands`` (with ``eval_reference``, the starting
backbone's column, which needs torch) and ``serve_commands``; ``activity`` spins on the terminal while a
silent phase (torch, a model, an index) loads.
"""

"""Looking after a files index over its life: backups, checks and model upgrades.

``index_snapshot`` (``snapshot_index``: a consistent copy while the service writes, hard links where the
file system allows, the sha256 of every file in ``snapshot.json``) and ``index_verify``
(``verify_index``: every file, id, vector and record checked, the first problem named), with
``model_check`` (the model copy: it loads, fits its graph, is what the index was built with; ``--deep``
embeds a sample again) and ``load_checks`` (what every load checks: the manifest's seal and the model copy;
``--verify-on-load`` adds all of verify's). A model upgrade
without downtime: ``generations`` (the live, next and previous generations on disk, and the journaled
switch between them), ``generation_sync`` (one generation caught up with another's items, embedded with
its own model) and ``model_upgrade`` (``rebuild_index``, ``switch_index``, ``rollback_index``).
"""

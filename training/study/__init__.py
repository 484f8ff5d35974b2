"""``retrieval study``: the Reality Check protocol (Musgrave et al., ECCV 2020) as one resumable command.

For each loss, a hyperparameter search (``tuning.search``: optuna TPE over ``tuning.search_space``) maximises the
mean validation MAP@R over k class-disjoint folds of the training classes (``tuning.folds``); the best
settings are then trained once per seed and fold (``final_runs``) and each chosen model embeds the
test classes once (``reporting.evaluation``: "separated" and "concatenated", float and binary). A fold trains
either the whole network with the ``Trainer`` (``backends.finetune_backend``) or, with ``--cached-features``,
only the head and the loss on frozen backbone features embedded once (``backends.cached_features``,
``backends.head_training``, ``backends.cached_backend``), each handing back a ``backends.fold_result``. ``tuning.study_config`` is the
config of one loss in the study (its recipe, the budget options, a trial's values), ``reporting.reference`` the
pretrained row, ``reporting.stats`` the confidence intervals, ``reporting.report`` the tables and plot, ``reporting.summary`` the
text of study.md (command, protocol, tables, search, time), ``study_state`` the output directory (``study.json``, resuming), ``tuning.feasibility`` the check that every
loss can form its batches on every fold before the first trial, and ``runner`` ties them together.
"""

"""``retrieval study``: the Reality Check protocol (Musgrave et al., ECCV 2020) as one resumable command.

For each loss, a hyperparameter search (``search``: optuna TPE over ``search_space``) maximises the
mean validation MAP@R over k class-disjoint folds of the training classes (``folds``); the best
settings are then trained once per seed and fold (``final_runs``) and each chosen model embeds the
test classes once (``evaluation``: "separated" and "concatenated", float and binary). A fold trains
either the whole network with the ``Trainer`` (``finetune_backend``) or, with ``--cached-features``,
only the head and the loss on frozen backbone features embedded once (``cached_features``,
``head_training``, ``cached_backend``), each handing back a ``fold_result``. ``study_config`` is the
config of one loss in the study (its recipe, the budget options, a trial's values), ``reference`` the
pretrained row, ``stats`` the confidence intervals, ``report`` the tables and plot, ``summary`` the
text of study.md (command, protocol, tables, search, time), ``state`` the output directory (``study.json``, resuming), ``feasibility`` the check that every
loss can form its batches on every fold before the first trial, and ``runner`` ties them together.
"""

"""The hyperparameter search of a study: ``search`` (optuna TPE over
``search_space``, maximising the mean validation MAP@R over the folds of ``backends.folds``), ``study_config`` (the config of one loss in the study: its recipe, the budget options,
a trial's values) and ``feasibility`` (every loss can form its batches on every fold, checked before the
first trial).
"""

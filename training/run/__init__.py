"""One training run: ``trainer`` (fit, validate, keep the best, test once), ``optim`` (parameter
groups, optimizers, schedules), ``distributed`` (N ranks x B == 1 x N*B), ``embed`` (a loader's
embeddings), ``split_metrics`` (a val/test split's metrics), ``reference`` and ``reference_eval`` (the
pretrained row a trained model must beat), ``run_dir`` (the run directory: config, checkpoints,
metrics), ``run_model`` (a finished run's model restored), ``run_summary`` (the start-of-run table),
``curves`` and ``tracking`` (plots and TensorBoard) and ``interrupt`` (Ctrl-C between steps)."""

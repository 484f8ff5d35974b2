"""One training run: ``final_fit`` (how a run is trained: one fit, or a class-disjoint fit that chooses the
epochs and a final fit on every class), ``trainer`` (fit, validate, keep the best, test once) on ``loop`` (the optimisation
step, the divergence stop and the choice of the best epoch, shared with the study's head training).
Inputs: ``train_batches`` (images, or activations of frozen stages) from ``frozen_prefix`` (frozen
stages run in onnxruntime on the CPU) and ``activation_cache`` (K augmented views per image, made
once); ``split_inputs`` (a val/test split, its frozen-stage activations made once, a model's embeddings kept); ``embed`` (a
loader's embeddings). Measures: ``split_metrics`` (a split's typed metrics), ``reference`` and
``reference_eval`` (the starting backbone as a model: epoch 0 and the reference row), ``verdict``
(did training beat it, in one sentence), ``whitening_stage`` (after training: the whitening and the
code's rotation fitted on training classes, chosen on validation, folded into the model), ``trained_run`` (what a finished run reports, typed). Around them: ``optim`` (parameter groups, optimizers,
schedules), ``distributed`` (N ranks x B == 1 x N*B), ``run_dir`` (the run directory), ``run_model`` (a
checkpoint's model restored), ``run_summary`` (the start-of-run table), ``curves`` and ``tracking``
(plots and TensorBoard) and ``interrupt`` (Ctrl-C between steps)."""

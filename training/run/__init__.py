"""One training run: ``fitting.final_fit`` (how a run is trained: one fit, or a class-disjoint fit that chooses the
epochs and a final fit on every class), ``fitting.trainer`` (fit, validate, keep the best, test once) on ``fitting.loop`` (the optimisation
step, the divergence stop and the choice of the best epoch, shared with the study's head training).
Inputs: ``inputs.train_batches`` (images, or activations of frozen stages) from ``inputs.frozen_prefix`` (frozen
stages run in onnxruntime on the CPU) and ``inputs.activation_cache`` (K augmented views per image, made
once); ``inputs.split_inputs`` (a val/test split, its frozen-stage activations made once, a model's embeddings kept); ``inputs.embed`` (a
loader's embeddings). Measures: ``measures.split_metrics`` (a split's typed metrics), ``measures.reference`` and
``measures.reference_eval`` (the starting backbone as a model: epoch 0 and the reference row), ``measures.verdict``
(did training beat it, in one sentence), ``measures.whitening_stage`` (after training: the whitening and the
code's rotation fitted on training classes, chosen on validation, folded into the model), ``measures.trained_run`` (what a finished run reports, typed). Around them: ``fitting.optim`` (parameter groups, optimizers,
schedules), ``fitting.distributed`` (N ranks x B == 1 x N*B), ``outputs.run_dir`` (the run directory), ``outputs.run_model`` (a
checkpoint's model restored), ``outputs.run_summary`` (the start-of-run table), ``outputs.curves`` and ``outputs.tracking``
(plots and TensorBoard) and ``fitting.interrupt`` (Ctrl-C between steps)."""

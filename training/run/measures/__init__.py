"""What a run measures and reports: ``split_metrics`` (a split's typed
metrics), ``reference`` and ``reference_eval`` (the starting backbone as a model: epoch 0 and the
reference row; ``reference_columns``: the same rows as ``retrieval eval --model``'s columns), ``verdict`` (did training beat it, in one sentence), ``whitening_stage`` (after training:
the whitening and the code's rotation fitted on training classes, chosen on validation, folded into the
model), ``calibration_fit`` (the score -> probability map fitted on the validation classes and measured on the
test classes), ``trained_run`` (what a finished run reports, typed) and ``run_summary`` (the start-of-run table).
Above ``run.outputs``: measures read the run directory, outputs never read a measure.
"""

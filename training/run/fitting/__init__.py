"""The fit itself: ``final_fit`` (how a run is trained: one fit, or a
class-disjoint fit that chooses the epochs and a final fit on every class), ``trainer`` (fit, validate,
keep the best, test once; its parts ``trainer_tests``: validation, selection, whitening and the test,
``trainer_checkpoints``: a checkpoint's state, saving, resuming, and ``trainer_parts``: their shared attributes) on ``loop`` (the optimisation step, the divergence stop and the choice of the
best epoch, shared with the study's head training), ``optim`` (parameter groups, optimizers, schedules),
``distributed`` (N ranks x B == 1 x N*B), ``interrupt`` (Ctrl-C between steps) and ``train_batches``
(the loop's batches: images, or activations of frozen stages, from ``run.inputs``).
"""

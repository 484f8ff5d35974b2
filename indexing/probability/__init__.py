"""Calibrated probabilities: the chance that a hit shares the query's class, read off its score.

``common.score_calibration`` holds the fitted map as ``model.json`` stores it (``ScoreCalibration``: a monotone
curve per score kind, what it was fitted on, the base rate it was fitted at) and applies it; it lives in ``common``
because the model's manifest, below this folder, carries it. ``logistic`` (Platt's fit, the
chosen one) and ``isotonic`` (pool adjacent violators, kept for the comparison in docs/results.md) fit a curve;
``pair_scores`` turns embeddings or search results into (score, same class) pairs; ``fitting`` fits both kinds on
the validation classes (searched among the training images too); ``reliability`` measures a fit where it was not fitted (ECE, precision and recall kept at
cut-offs) and ``reliability_plot`` draws the reliability diagram; ``held_out`` measures a model's calibration on held-out
classes (eval and the run summary) and ``alternatives`` compares the fits the docs weigh against each other. Pure numpy: the service reads it.
"""

"""Calibrated probabilities: the chance that a hit shares the query's class, read off its score, how far it can
be trusted, and the cut-off a query's own probabilities choose.

``common.score_calibration`` holds the fitted map as ``model.json`` stores it (``ScoreCalibration``: a monotone
curve per score kind, what it was fitted on, the base rate it was fitted at, its width) and applies it; it lives
in ``common`` because the model's manifest, below this folder, carries it. ``logistic`` (Platt's fit, the
chosen one; the fits it was chosen against are bench/'s: ``isotonic_fit.py``, ``calibration_alternatives.py``) fits a curve;
``pair_scores`` turns embeddings or search results into (score, same class) pairs; ``fitting`` fits both kinds on
the validation classes (searched among the training images too); ``interval`` puts a width on a Platt fit from
the classes it rests on (a jackknife over the fitting classes, Student's t with one degree of freedom fewer than
the classes) and grades the calibration; ``reliability`` measures a fit where it was not fitted (ECE, precision
and recall kept at cut-offs) and ``reliability_plot`` draws the reliability diagram; ``held_out`` measures a
model's calibration on held-out classes (eval and the run summary); ``reliability_warnings`` turns an unreliable calibration into the sentences every
response that uses it carries (``warnings``), with one more for ``min_probability`` on it; ``cutoff`` is
``cutoff=auto``: per query the number of hits that maximises the expected F1 of its probabilities,
``min_probability`` its floor. Pure numpy: the service reads it.
"""

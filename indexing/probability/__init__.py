"""What a hit's probability can be trusted for, and the cut-off a query's own probabilities choose.

``interval`` puts a width on a Platt fit from the classes it rests on (a jackknife over the fitting classes,
Student's t with one degree of freedom fewer than the classes) and grades the calibration;
``reliability_warnings`` turns an unreliable calibration into the sentences every response that uses it
carries (``warnings``), with one more for ``min_probability`` on it; ``cutoff`` is ``cutoff=auto``: per query
the number of hits that maximises the expected F1 of its probabilities, ``min_probability`` its floor. Pure
numpy: the service reads it.
"""

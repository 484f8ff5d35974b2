"""Offline evaluation: ``metrics`` (Recall@K, MAP@R, R-precision, P@1: the one implementation),
``nmi`` (k-means NMI), ``evaluation`` (embed or read an index and measure, float and binary) and
``retrieval_grid`` (the query -> results PNG)."""

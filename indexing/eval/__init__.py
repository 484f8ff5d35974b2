"""Offline evaluation: ``metrics`` (Recall@K, MAP@R, R-precision, P@1: the one implementation),
``nmi`` (k-means NMI), ``evaluation`` (embed or read an index and measure, float and binary),
``postprocess_eval`` (each post-processing method's metrics beside the raw row, ``eval
--postprocess``), ``retrieval_grid`` (the query -> results PNG), ``neighbour_table`` (each query's top results as a
table, ``eval --neighbours``), ``class_overlap`` (evaluated classes the model was trained on) and
``gain_interval`` (the paired bootstrap interval of a MAP@R gain, the training verdict's noise) and
``text_to_image`` (a prompt per class searched by a model's text tower: the text -> image row)."""

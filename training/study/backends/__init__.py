"""How a study trains one fold: the whole network with the
``Trainer`` (``finetune_backend``) or, with ``--cached-features``, only the head and the loss on frozen
backbone features embedded once (``cached_features``, ``head_training``, ``cached_backend``); each hands
back a ``fold_result``, measured by ``study_evaluation`` (each chosen model embeds the test classes once:
"separated" and "concatenated", float and binary) on the ``folds`` (k class-disjoint folds of the training
classes). Below ``tuning`` and ``reporting``, which import it and never the other way.
"""

"""The data audit (``retrieval data audit``, ``retrieval index audit``, ``GET /audit``): which items are probably
mislabelled, which belong to no class, and what to tell the training run. Torch-free; read bottom-up:

``whitening`` (within-class whitening, the LDA view of class means) <- ``neighbours`` (out-of-fold k-NN: never
the item nor its copies) <- ``class_votes`` (neighbour votes and left-out class means: each item's share of its
given label and the best other class) <- ``outlier_scores`` (how far an item is from every class) <-
``audit_scores`` (``audit_scores``: all of it over labelled vectors) <- ``audit_report`` (``AuditReport``: the
rows of ``label_issues.csv`` and ``outliers.csv``, ``audit.json``, ``audit.png``, the exclusion list and
``relabel.csv``) <- ``audit_records`` (the last audit of each dataset, for ``retrieval train``'s note) and
``relabel`` (``apply_relabel``: ``relabel.csv`` applied to a copy of a dataset folder) <-
``auditing`` (the use cases the CLI, the Python API and the HTTP route all call: ``audit_dataset``,
``audit_vectors``, ``audit_index``, ``audit_page``). The method, its assumptions and failure modes: docs/data.md.
"""

"""Everything of the product that does not need torch, as sub-packages with one-way dependencies.

``common`` (errors, atomic writes, artifact names, the registry shape) <- ``data`` (records, dataset
layouts, splits, image decoding, the synthetic generator) <- ``exported_model`` (``model.json``,
preprocessing, the ONNX embedder) <- ``search`` (result type, search kinds, binary codes, exact
k-NN) <- ``probability`` (score calibration: a score's probability of sharing the query's class, fitted, measured;
its width, the warnings of an unreliable calibration, ``cutoff=auto``)
and ``examples`` (search by positive and negative examples, grouping, diversity: pure functions)
<- ``store`` (indexes: the files and Milvus backends behind one ``Store``, builds, shards)
<- ``eval`` (metrics, NMI, evaluation, retrieval grid)
<- ``duplicates`` (copies: exact, near, verified, grouped; their threshold)
<- ``query`` (the ``Query`` value, a search's candidates and its one chain of result steps) <- ``usecases`` (the torch-free Python API, and
what the commands run) <- ``audit`` (the data audit: probable mislabels and outliers, out of fold). A module imports only from its own sub-package and the ones to its left
(tests/test_package_layout.py checks it). Neither this package nor ``retrieval.serving`` may import
torch (tests/test_no_torch_import.py checks it).
"""

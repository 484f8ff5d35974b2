"""Everything of the product that does not need torch, as sub-packages with one-way dependencies.

``common`` (errors, atomic writes, artifact names) <- ``data`` (records, dataset layouts, splits,
image decoding, the synthetic generator) <- ``model`` (``model.json``, preprocessing, the ONNX
embedder) <- ``search`` (result type, binary codes, exact k-NN) <- ``store`` (index directories:
faiss kinds, item table, build and update) <- ``eval`` (metrics, NMI, evaluation, retrieval grid).
A module imports only from its own sub-package and the ones to its left. Neither this package nor
``retrieval.serving`` may import torch (tests/test_no_torch_import.py checks it).
"""

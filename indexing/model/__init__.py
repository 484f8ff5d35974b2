"""An exported embedder used without torch: ``manifest`` (``model.json``: preprocessing, sizes,
sha), ``preprocess`` (the eval transform in NumPy/Pillow), ``onnx_embedder`` (ONNX Runtime inference
and ``embed_records``), ``resolution`` (``--model`` argument -> export directory)."""

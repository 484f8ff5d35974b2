"""An exported embedder used without torch: ``model_manifest`` (``model.json``: preprocessing, sizes,
sha; its ``verdict`` is a ``training_verdict``, its ``duplicates`` a ``copy_threshold``, its ``text`` a ``text_side``), ``preprocess`` (the eval transform in NumPy/Pillow), ``onnx_embedder`` (ONNX Runtime inference
and ``embed_records``), ``resolution`` (``--model`` argument -> export directory) and
``embedding_files`` (embeddings with their items, as ``retrieval embed`` writes them) and ``cpu_kind``
(the CPU kind an INT8 model meets, and the warning when its check did not run on that kind), and ``no_model``
(the mark of an index built from vectors alone, and the one sentence that refuses what needs a model), and
``text_encoder`` (``text.onnx`` + ``tokenizer.json``: texts -> vectors in the image space, and the refusal of
a text query on a model without a text side)."""

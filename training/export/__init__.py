"""A run to ONNX: ``run_export`` (``retrieval export RUN``: one model or an ensemble), ``onnx_export``
(one model to ``model.onnx`` + ``model.json``, checked against torch before anything is written),
``ensemble_export`` (the members joined into one graph), ``int8_export`` (the INT8 model, checked on
the validation classes), ``int8_quantization`` (onnxruntime's static quantization), ``size_note`` (why
the model is not as wide as the configured ``--embedding-dim``), ``copy_threshold_export`` (the copy
threshold measured on the run's training images, added to ``model.json``) ``pretrained_export`` (the
default model of ``retrieval data duplicates``: EfficientNet-Lite0's ImageNet features, centred) and
``text_export`` (a training-free CLIP run's text tower and tokenizer beside its image model)."""

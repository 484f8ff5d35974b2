"""What a training run feeds its model (``run.fitting.train_batches`` batches them): ``frozen_prefix``
(frozen stages run in onnxruntime on the CPU) and
``activation_cache`` (K augmented views per image, made once); ``split_inputs`` (a val/test split, its
frozen-stage activations made once); ``embed`` (a loader's embeddings).
"""

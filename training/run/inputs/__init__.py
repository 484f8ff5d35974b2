"""What a training run feeds its model: ``train_batches`` (images, or
activations of frozen stages) from ``frozen_prefix`` (frozen stages run in onnxruntime on the CPU) and
``activation_cache`` (K augmented views per image, made once); ``split_inputs`` (a val/test split, its
frozen-stage activations made once); ``embed`` (a loader's embeddings).
"""

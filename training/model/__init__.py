"""The network: ``backbones`` (registry of trunks: torchvision, EfficientNet-Lite, any timm model
through ``timm_trunks``), ``imagenet_weights`` and ``pretrained`` (ImageNet weights found offline, or a
file), ``embedding_model`` (trunk -> pooling -> LayerNorm -> head -> L2 norm), ``ensemble_model``
(members joined into one embedding), ``static_padding`` (TF-"same" pads fixed for export) and
``device`` (device and autocast precision)."""

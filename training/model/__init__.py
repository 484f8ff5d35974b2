"""The network: ``trunks.backbones`` (registry of trunks: torchvision, EfficientNet-Lite0/1/2, DINOv2/CLIP/SigLIP
vision transformers, any timm model through ``trunks.timm_trunks``), ``trunks.vit_trunks`` (a timm vision transformer made
for the image size, returning its tokens, and its stages), ``trunks.trunk_stages`` (a trunk as a sequence of stages,
the first ones freezable), ``trunks.imagenet_weights`` (ImageNet weights found offline) and ``pretrained`` (weights loaded into
the embedding model: ImageNet, hub weights, or a file), ``hub_weights`` (a weights file downloaded from the Hugging Face hub with consent, resumable
across runs, checksum verified), ``embedding_model`` (trunk -> pooling -> LayerNorm -> head -> L2 norm; from any stage),
``token_pooling`` (a transformer's tokens pooled: cls, mean, cls+mean), ``ensemble_model`` (members joined
into one embedding), ``whitening`` (a learned linear map after the embedding: PCA or supervised
whitening, numpy) and ``itq`` (the rotation that fits the sign code: iterative quantization),
``trunks.static_padding`` (TF-"same" pads fixed for a size), ``onnx_graph`` (a module as
ONNX bytes, the one ``torch.onnx.export``) and ``device`` (device and autocast precision). A CLIP's or SigLIP's
text side: ``text/`` (open_clip's towers, the exported text graph, the tokenizers) and ``tower_projection`` (the
image tower's projection, or SigLIP's attention-pool head, so the trunk's tokens give its embedding)."""

"""The trunks an embedder is built on: ``backbones`` (the registry:
torchvision, EfficientNet-Lite0/1/2, DINOv2/CLIP/SigLIP vision transformers, any timm model through
``timm_trunks``), ``vit_trunks`` (a timm vision transformer made for the image size, returning its tokens,
and its stages), ``trunk_stages`` (a trunk as a sequence of stages, the first ones freezable),
``static_padding`` (TF-"same" pads fixed for a size), ``backbone_facts`` (what ``retrieval backbones`` lists,
a torch-free table held equal to the registry), ``imagenet_weights`` (ImageNet
weights found offline; ``training.model.pretrained`` loads them into the embedding model).
"""

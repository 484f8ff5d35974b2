"""A CLIP's or SigLIP's text side: ``text_towers`` (open_clip's model, both towers as modules), ``text_graph``
(the text tower as exported, CLIP's cut after the end token) and ``clip_tokenizer`` / ``siglip_tokenizer`` (the
tokenizers as ``tokenizers`` files)."""

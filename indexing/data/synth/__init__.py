"""The built-in synthetic dataset: ``concepts`` (classes = shape x colour x texture), ``shapes`` and
``textures`` (their geometry), ``render`` (one image), ``generator`` (an ImageFolder on disk)."""

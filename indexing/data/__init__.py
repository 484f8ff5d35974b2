"""Image records and where they come from.

``records`` holds the one record type (``record_keys``: item keys from a ``path,key`` file); ``sources`` (``load_records``) recognises a dataset layout
(``layouts/``: ImageFolder, CSV manifest, CUB-200-2011, Cars196, SOP, In-Shop); ``splits`` makes the
class-disjoint train / validation / test splits (``subsample`` first caps the images per class, for
quick runs); ``image_io`` decodes any image to 8-bit RGB or fails with one sentence, and
``exclusion`` leaves out the images a list names (``train --exclude``), ``bad_images`` scans a dataset for unreadable and too small files up front, ``class_check`` for empty
class folders and single-image classes; ``synth/`` generates the built-in
shapes x colours x textures dataset.
"""

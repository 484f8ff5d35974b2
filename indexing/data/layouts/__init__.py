"""Readers of the dataset layouts, one module each: ``imagefolder``, ``csv_manifest``, ``cub``,
``cars196``, ``sop`` and ``inshop`` (query/gallery flags); ``layout_files`` parses their text tables.
``retrieval.indexing.data.sources`` picks the reader from the files a path holds."""

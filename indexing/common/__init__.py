"""What every stage shares: user-facing errors (``errors``), crash-safe writes (``atomic_write``),
the file and folder names of the on-disk artifacts (``artifact_names``), the one name -> entry
table shape (``registry``) and tables written as .parquet or .csv (``table_files``)."""

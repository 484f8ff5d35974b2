"""What every stage shares: user-facing errors (``errors``), crash-safe writes (``atomic_write``) and
directory renames that finish after a crash (``directory_moves``),
the file and folder names of the on-disk artifacts (``artifact_names``), the one name -> entry
table shape (``registry``), tables written as .parquet or .csv (``table_files``) and text that UTF-8
can encode (``unicode_text``: lone surrogates refused where text comes in, replaced where it is read), and
``score_calibration``: a model's fitted score -> P(same class) map as ``model.json`` stores it (fitted by
``indexing.probability``, applied by the store to every hit)."""

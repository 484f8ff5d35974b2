"""What every stage shares: user-facing errors (``errors``), crash-safe writes (``atomic_write``)
and the file and folder names of the on-disk artifacts (``artifact_names``)."""

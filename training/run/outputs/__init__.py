"""The run directory and what a run writes into it: ``run_dir`` (the
directory's files, claiming it), ``run_model`` (a checkpoint's model restored), ``curves`` and ``tracking``
(plots and TensorBoard).
"""

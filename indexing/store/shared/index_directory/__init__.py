"""The index directory itself: ``index_manifest``
(``manifest.json``), ``file_checksums`` (the sha256 of every file, recorded in the manifest),
``compaction`` (its policy, and what a compaction did), ``write_lock`` (one writer per directory) and
``index_dir`` (writing a new directory: the checks, the model copy, the staged swap).
"""

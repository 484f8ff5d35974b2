"""The files backend's segments on disk: ``segments``
(an immutable base + append-only deltas + tombstones), ``segment_files`` (each segment's three files),
``segment_set`` (the loaded segments, id -> row -> segment), ``segment_merge`` (the files of a compaction)
and ``compaction_plan`` (when and what to compact).
"""

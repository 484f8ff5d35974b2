"""Copies, as use cases: ``dataset_duplicates`` (``find_dataset_duplicates``, ``find_exact_copies``: exact and near
copies in a dataset, within and across classes and across the class-disjoint split) and ``index_duplicates``
(``find_index_duplicates``, ``store_duplicate_groups``, ``item_duplicates``: groups of copies in a gallery)."""

"""The items of an index and the filter over them: ``items_db``
(``items.sqlite`` and ``Item``), ``item_paths`` (image paths inside the index stored relative to it),
``item_filter`` (item metadata and the search filter), ``filter_conditions`` (the filter language's
operators) and ``filter_sql`` (a filter as SQL).
"""

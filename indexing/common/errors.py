"""User-facing errors: raised with one clear sentence, printed by the CLI without a traceback."""


class RetrievalError(Exception):
    """A problem the user can fix (bad input, missing file, mismatched model). Message = the fix."""


class DataError(RetrievalError):
    """A dataset, image or split problem."""


class ConfigError(RetrievalError):
    """A bad configuration key or value."""


class IndexFormatError(RetrievalError):
    """An index directory is missing, corrupt or built by another model."""


class ItemNotFoundError(DataError):
    """An item id that the index does not hold, or an item whose image file is gone (the service answers 404)."""


class KeyConflictError(DataError):
    """An item key that another item of the index already carries, or given twice (the service answers 409)."""


class IndexChangedError(RetrievalError):
    """Another process rewrote the index since this one opened it (the service answers 409)."""


class IndexNotWritableError(RetrievalError):
    """The index directory cannot be written (read-only mount, full disk); the service answers 503."""


class IndexBusyError(IndexNotWritableError):
    """Another writer held the index's writer lock past the wait limit; retry later (the service: 503)."""


class ModelMismatchError(DataError):
    """Vectors made by another model than the index's (the service answers 409, naming both models)."""

"""``SearchSettings``: how to search, one value with one name per setting, checked once.

Every entry point spells the settings with the same names (``SEARCH_OPTIONS``; docs/CONTRACTS.md has the
table): ``retrieval search`` (``--k``, ``--kind``, ``--rerank``, ``--filter``, ``--postprocess``, ``--offset``,
``--min-score``), the Python API's ``search`` (``k``, ``kind``, ``rerank``, ``filter``, ``postprocess``,
``offset``, ``min_score``) and the service's ``POST /search`` and ``GET /items/{id}/similar`` (the same
names as the Python API); the older spellings (``--binary``, ``where=``, ``index=``) stay as aliases. Every
rule between options is checked here, so each door refuses with the same sentence. Inside, the filter is
the ``where`` field; every layer (``query.chain``, ``postprocessed_search``, the stores) reads these names. The service's own limits
(``k_max``, the deepest page) stay with the service: they are its policy, not the settings' meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, TypeVar

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.examples.strategies import STRATEGIES
from retrieval.indexing.probability.cutoff import CUTOFF_MODES
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.postprocess_params import QUERY_METHODS
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, parse_filter

T = TypeVar("T")
ScoreKind = Literal["cosine", "hamming", "kreciprocal"]
MIN_SCORE_RANGE = (-1.0, 1.0)
"""Every score kind lies in it: cosine, ``1 - 2 * hamming / bits``, ``1 -`` the k-reciprocal distance."""
SEARCH_OPTIONS = ("k", "kind", "rerank", "filter", "postprocess", "offset", "min_score")
"""The one name of each search option in every door (the CLI writes them as ``--k``, ``--min-score``, ...)."""
OPTION_ALIASES = {"kind": ("--binary", "index"), "filter": ("where",)}
"""The older spellings each door still accepts: the CLI's ``--binary``, the service's ``index``, the Python
API's ``where``."""
MAX_GROUP_SIZE = 1000
"""The most hits one group holds (group_by fetches k x group_size candidates at least)."""
RERANK_NEEDS_BINARY = (
    "rerank re-orders a shortlist of the binary index by float cosine, so it needs kind binary "
    "(a float search is exact already)."
)
"""The one sentence every door gives for a rerank on the float index."""


@dataclass(frozen=True)
class SearchSettings:
    """``k`` hits per query after skipping the best ``offset`` (paging), of the ``kind`` index
    (``"float"`` or ``"binary"``; ``rerank=N``: a binary shortlist of N re-ranked by float), among the
    items that pass ``where``, after ``postprocess`` (none, qe or kreciprocal), and of those only the
    ones scoring at least ``min_score`` and whose calibrated probability of sharing the query's class is at least
    ``min_probability`` (``indexing.query.steps.probability``); ``cutoff="auto"`` then keeps, per query, the
    first hits its own probabilities mark as worth keeping (``indexing.probability.cutoff``, ``min_probability``
    its floor). A bad value is a DataError naming it."""

    k: int = 10
    kind: Literal["float", "binary"] = "float"
    rerank: int | None = None
    where: ItemFilter | None = None
    postprocess: str = "none"
    offset: int = 0
    min_score: float | None = None
    min_probability: float | None = None
    collapse_duplicates: bool = False
    """One hit per group of copies (the best ranked; copies: the model's measured copy threshold)."""
    strategy: str | None = None
    """How ``positive``/``negative`` examples are searched (``indexing.examples.strategies``); None: no examples."""
    group_by: str | None = None
    """``"label"`` or a metadata key: the best ``k`` groups of items sharing it, ``group_size`` hits each."""
    group_size: int = 1
    diversity: float | None = None
    """MMR's weight of novelty over the first candidates, 0 (the plain order) to 1."""
    cutoff: str = "none"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", SearchKind.of(self.kind).value)  # the enum given: its name
        if not _whole(self.k) or self.k < 1:
            raise DataError(f"k must be at least 1, got {self.k}")
        if self.rerank == 0 and _whole(self.rerank):  # the Python API's search took 0 as "no re-ranking"
            object.__setattr__(self, "rerank", None)
        if self.rerank is not None and (not _whole(self.rerank) or self.rerank < 1):
            raise DataError(f"rerank must be a whole number of at least 1, got {self.rerank!r}")
        if self.rerank is not None and self.kind != SearchKind.BINARY.value:
            raise DataError(RERANK_NEEDS_BINARY)
        if self.where is not None and not isinstance(self.where, ItemFilter):
            raise TypeError("where must be an ItemFilter (SearchSettings.parse reads JSON text or a mapping)")
        if self.postprocess not in QUERY_METHODS:
            raise DataError(f"unknown postprocess {self.postprocess!r}; use one of {', '.join(QUERY_METHODS)}")
        if not _whole(self.offset) or self.offset < 0:
            raise DataError(f"offset must be a whole number of at least 0, got {self.offset!r}")
        low, high = MIN_SCORE_RANGE
        if self.min_score is not None and not low <= self.min_score <= high:  # NaN fails too
            raise DataError(
                f"min_score must be between {low:g} and {high:g} (scores are similarities), got {self.min_score}"
            )
        if self.min_probability is not None and not 0.0 <= self.min_probability <= 1.0:
            raise DataError(f"min_probability must be between 0 and 1, got {self.min_probability}")
        if self.strategy is not None:
            STRATEGIES.get(self.strategy)  # an unknown name: a DataError naming the known ones
        if self.group_by is not None and (not isinstance(self.group_by, str) or not self.group_by.strip()):
            raise DataError(f"group_by must be 'label' or a metadata key, got {self.group_by!r}")
        if not _whole(self.group_size) or not 1 <= self.group_size <= MAX_GROUP_SIZE:
            raise DataError(f"group_size must be a whole number from 1 to {MAX_GROUP_SIZE}, got {self.group_size!r}")
        if self.group_size != 1 and self.group_by is None:
            raise DataError("group_size needs group_by (the label or metadata key the hits are grouped by).")
        if self.diversity is not None and not 0.0 <= self.diversity <= 1.0:  # NaN fails too
            raise DataError(f"diversity must be between 0 (the plain order) and 1, got {self.diversity}")
        if self.cutoff not in CUTOFF_MODES:
            raise DataError(f"unknown cutoff {self.cutoff!r}; use one of {', '.join(CUTOFF_MODES)}")

    @classmethod
    def parse(
        cls,
        *,
        k: int = 10,
        kind: str = "float",
        rerank: int | None = None,
        where: str | Mapping[str, Any] | ItemFilter | None = None,
        postprocess: str = "none",
        offset: int = 0,
        min_score: float | None = None,
        filter_name: str = "filter",
        min_probability: float | None = None,
        collapse_duplicates: bool = False,
        strategy: str | None = None,
        group_by: str | None = None,
        group_size: int = 1,
        diversity: float | None = None,
        cutoff: str | None = None,
    ) -> SearchSettings:
        """The settings with ``where`` given as JSON text, a mapping or a parsed filter; ``filter_name`` is
        how the entry point spells the filter in its error messages (``--filter``, ``parameter 'filter'``)."""
        item_filter = where if isinstance(where, ItemFilter) else parse_filter(where, filter_name)
        return cls(
            k,
            kind,  # type: ignore[arg-type]
            rerank,
            item_filter,
            postprocess,
            offset,
            min_score,
            min_probability,
            collapse_duplicates,
            strategy,
            group_by,
            group_size,
            diversity,
            cutoff or "none",
        )

    @property
    def search_kind(self) -> SearchKind:
        return SearchKind.of(self.kind)

    @property
    def depth(self) -> int:
        """How many of the best hits a search needs: the skipped ``offset`` and the ``k`` shown."""
        return self.offset + self.k

    @property
    def score_kind(self) -> ScoreKind:
        """Float and re-ranked binary searches score by cosine; plain binary ones by 1 - 2 * Hamming / bits;
        k-reciprocal re-ranking by 1 - its final distance."""
        if self.postprocess == "kreciprocal":
            return "kreciprocal"
        return "hamming" if self.search_kind is SearchKind.BINARY and not self.rerank else "cosine"


def aliased(name: str, value: T | None, alias: str, alias_value: T | None) -> T | None:
    """The option given by its ``name`` or by its older ``alias``; the two given with different values is a
    DataError, since which one to believe cannot be guessed."""
    if value is not None and alias_value is not None and value != alias_value:
        raise DataError(f"{name} and its older name {alias} disagree ({value!r}, {alias_value!r}); give {name} alone")
    return value if value is not None else alias_value


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SettingsOptions(TypedDict, total=False):
    """``SearchSettings.parse``'s keyword options, for a request that passes them on (``SearchRequest.of``)."""

    k: int
    kind: str
    rerank: int | None
    where: str | Mapping[str, Any] | ItemFilter | None
    postprocess: str
    offset: int
    min_score: float | None
    filter_name: str
    min_probability: float | None
    collapse_duplicates: bool
    strategy: str | None
    group_by: str | None
    group_size: int
    diversity: float | None
    cutoff: str | None

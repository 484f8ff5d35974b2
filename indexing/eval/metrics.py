"""Retrieval metrics: MAP@R, R-precision, P@1, Recall@K (+ NMI). The one implementation.

Definitions (docs/metrics.md): for a query with R relevant gallery items (same label, itself
excluded in the same-set protocol) and neighbours ranked best first,
MAP@R = (1/R) sum_{i<=R} P(i) rel(i), R-precision = (#relevant in top R) / R, P@1 = rel(1),
Recall@K = 1 if any of the top K is relevant (the DML definition). Queries with R = 0 are left
out of every k-NN metric. ``RetrievalMetrics.query_ap`` keeps MAP@R's per-query term (the paired
bootstrap of ``gain_interval`` resamples it). Memory is bounded: k = max(max R, max K), never the gallery size, and
queries run in chunks, so no N x N (or classes x N) array is ever built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.eval.nmi import nmi_kmeans
from retrieval.indexing.search.binary import codes_to_signs
from retrieval.indexing.search.knn import check_pair, iter_knn_chunks, knn_search
from retrieval.indexing.search.results import SearchResults

_SAME_SET_HEAP_BYTES = 512 << 20
"""Same-set float search keeps all N x k results (12 bytes each) when they fit in this budget."""
_SCORE_ELEMENTS = 1 << 22
"""Neighbour labels scored at once (bounds the temporaries of the per-query metrics)."""


@dataclass(frozen=True)
class RetrievalMetrics:
    """Averages over the queries that have at least one relevant gallery item."""

    map_at_r: float
    r_precision: float
    precision_at_1: float
    recall_at_k: dict[int, float] = field(default_factory=dict)
    nmi: float | None = None
    num_queries: int = 0
    query_ap: np.ndarray | None = field(default=None, compare=False, repr=False)
    """MAP@R's per-query term, one per counted query in query order (their mean is ``map_at_r``);
    None when read back from JSON, which does not hold it."""

    def to_dict(self) -> dict:
        """JSON-ready dict; recall keys become strings ("1", "2", ...); ``query_ap`` is left out."""
        values = {name: value for name, value in asdict(self).items() if name != "query_ap"}
        values["recall_at_k"] = {str(k): v for k, v in self.recall_at_k.items()}
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RetrievalMetrics:
        """The metrics ``to_dict`` wrote (other keys, such as a split's ``unreadable_images``, are ignored)."""
        return cls(
            map_at_r=float(values["map_at_r"]),
            r_precision=float(values["r_precision"]),
            precision_at_1=float(values["precision_at_1"]),
            recall_at_k={int(k): float(v) for k, v in (values.get("recall_at_k") or {}).items()},
            nmi=None if values.get("nmi") is None else float(values["nmi"]),
            num_queries=int(values.get("num_queries", 0)),
        )


def evaluate_retrieval(
    embeddings: np.ndarray,
    labels: np.ndarray,
    is_query: np.ndarray | None = None,
    is_gallery: np.ndarray | None = None,
    *,
    ks: Sequence[int] | None = None,
    metric: Literal["ip", "hamming"] = "ip",
    compute_nmi: bool = True,
    seed: int = 0,
    progress: bool = False,
) -> RetrievalMetrics:
    """THE evaluation of a labelled set under its query/gallery flags (docs/metrics.md, "Protocol").

    Queries are the items flagged ``is_query``, the gallery the items flagged ``is_gallery``
    (both default to all items). An item that is both never retrieves itself and is not counted
    in its own R. ``ks=None`` picks ``default_recall_ks`` for the gallery. Validation, the
    trainer's test, ``retrieval eval`` (model and index) and the benchmarks all call this.
    """
    n = len(np.asarray(labels))
    is_query = np.ones(n, bool) if is_query is None else np.asarray(is_query, bool)
    is_gallery = np.ones(n, bool) if is_gallery is None else np.asarray(is_gallery, bool)
    if len(is_query) != n or len(is_gallery) != n:
        raise DataError(f"got {n} labels but {len(is_query)} is_query and {len(is_gallery)} is_gallery flags.")
    labels = np.asarray(labels)
    chosen = resolve_ks(ks, labels[is_gallery])
    if bool(np.all(is_query & is_gallery)):
        return evaluate_embeddings(
            embeddings, labels, ks=chosen, metric=metric, compute_nmi=compute_nmi, seed=seed, progress=progress
        )
    queries, gallery = np.flatnonzero(is_query), np.flatnonzero(is_gallery)
    vectors = np.asarray(embeddings)
    return evaluate_embeddings(
        vectors[queries],
        labels[queries],
        vectors[gallery],
        labels[gallery],
        query_gallery_ids=gallery_positions(queries, gallery),
        ks=chosen,
        metric=metric,
        compute_nmi=compute_nmi,
        seed=seed,
        progress=progress,
    )


def gallery_positions(items: np.ndarray, gallery: np.ndarray) -> np.ndarray:
    """Position of each of ``items`` in the sorted ``gallery`` item array, -1 where it is not in it."""
    where = np.searchsorted(gallery, items).clip(0, max(len(gallery) - 1, 0))
    found = (len(gallery) > 0) & (gallery[where] == items) if len(gallery) else np.zeros(len(items), bool)
    return np.where(found, where, -1).astype(np.int64)


def relevant_counts(query_codes: np.ndarray, gallery_codes: np.ndarray, own: np.ndarray | None) -> np.ndarray:
    """R of each query: gallery items of its class, minus itself when it is in the gallery (``own >= 0``)."""
    counts = np.bincount(
        gallery_codes, minlength=int(max(query_codes.max(initial=0), gallery_codes.max(initial=0))) + 1
    )
    return counts[query_codes] - (0 if own is None else (np.asarray(own) >= 0).astype(np.int64))


def resolve_ks(ks: Sequence[int] | None, gallery_labels: np.ndarray) -> tuple[int, ...]:
    """The given Recall@K cut-offs (validated), or the defaults for this gallery: the one rule everywhere."""
    if ks:
        values = tuple(sorted({int(k) for k in ks}))
        if values[0] < 1:
            raise DataError(f"recall ks must be positive integers, got {tuple(ks)}.")
        return values
    return default_recall_ks(len(np.unique(gallery_labels)), len(gallery_labels))


def evaluate_embeddings(
    queries: np.ndarray,
    query_labels: np.ndarray,
    gallery: np.ndarray | None = None,
    gallery_labels: np.ndarray | None = None,
    *,
    query_gallery_ids: np.ndarray | None = None,
    ks: Sequence[int] = (1, 2, 4, 8),
    metric: Literal["ip", "hamming"] = "ip",
    compute_nmi: bool = True,
    seed: int = 0,
    progress: bool = False,
) -> RetrievalMetrics:
    """Exact k-NN metrics of ``queries`` against ``gallery`` (None: same-set protocol, self excluded).

    ``query_gallery_ids[i]`` is the gallery position of query i when it is also a gallery item
    (-1 when not): it is excluded from its own results and from its R. Prefer ``evaluate_retrieval``,
    which derives all of this from the records' flags.

    ``metric="hamming"`` takes packed codes from ``binarize``. Labels may be ints or strings.
    NMI clusters the queries (as pytorch-metric-learning does); binary codes are clustered as
    +-1 floats.
    """
    same_set = gallery is None
    if same_set and gallery_labels is not None:
        raise DataError("gallery_labels were given without a gallery; pass both or neither.")
    queries, gallery_vectors = check_pair(queries, queries if gallery is None else gallery, metric)
    gallery_vectors = queries if same_set else gallery_vectors
    query_codes, gallery_codes = _encode_labels(query_labels, query_labels if same_set else gallery_labels)
    _check_lengths(queries, query_codes, gallery_vectors, gallery_codes)
    ks = resolve_ks(ks, gallery_codes)
    own = np.arange(len(queries)) if same_set else _check_own(query_gallery_ids, len(queries), len(gallery_vectors))
    relevant = relevant_counts(query_codes, gallery_codes, own)
    if not (relevant > 0).any():
        raise DataError(
            "no query has a gallery item of its own class, so no retrieval metric is defined; check the labels."
        )
    k = min(max(int(relevant.max()), max(ks)), len(gallery_vectors) - int(own is not None and bool((own >= 0).any())))
    search = _Search(queries, gallery_vectors, same_set, own, metric, progress)
    sums = _search_and_score(search, query_codes, gallery_codes, relevant, k, ks)
    nmi = _nmi(queries, query_codes, metric, seed) if compute_nmi else None
    return sums.metrics(nmi)


def metrics_from_neighbor_labels(
    neighbor_labels: np.ndarray, query_labels: np.ndarray, relevant_counts: np.ndarray, ks: Sequence[int]
) -> RetrievalMetrics:
    """Pure scoring of ranked neighbour labels (e.g. an approximate index's ``SearchResults``).

    Rows are best first; pad missing slots with a label that never matches a query (-1).
    Relevant items beyond the last column count as misses. Rows with ``relevant_counts == 0``
    are left out.
    """
    labels = np.asarray(neighbor_labels)
    query_labels, counts = np.asarray(query_labels), np.asarray(relevant_counts, dtype=np.int64)
    if labels.ndim != 2 or not len(labels) == len(query_labels) == len(counts):
        raise DataError(
            f"neighbour labels {labels.shape}, {len(query_labels)} query labels and {len(counts)} relevant counts must agree."
        )
    sums = _Sums(resolve_ks(ks, np.zeros(0)))
    for start in range(0, len(labels), _score_chunk(labels.shape[1])):
        rows = slice(start, start + _score_chunk(labels.shape[1]))
        sums.add(labels[rows], query_labels[rows], counts[rows])
    if sums.count == 0:
        raise DataError("no query has a relevant gallery item (all relevant_counts are 0); check the labels.")
    return sums.metrics(None)


def default_recall_ks(num_classes: int, num_items: int) -> tuple[int, ...]:
    """(1, 2, 4, 8) for few large classes (CUB, Cars); (1, 10, 100, 1000) when the mean class has
    fewer than 20 items (SOP, In-Shop); trimmed to K <= num_items (the gallery size)."""
    mean_class_size = num_items / max(num_classes, 1)
    ks = (1, 10, 100, 1000) if mean_class_size < 20 else (1, 2, 4, 8)
    return tuple(k for k in ks if k <= max(num_items, 1))


class _Sums:
    """Running per-query sums of every metric, so chunks can be scored and dropped."""

    def __init__(self, ks: tuple[int, ...]) -> None:
        self.ks = ks
        self.count = 0
        self.map_at_r = self.r_precision = self.precision_at_1 = 0.0
        self.recall = dict.fromkeys(ks, 0)
        self.query_ap: list[np.ndarray] = []

    def add(self, neighbor_labels: np.ndarray, query_labels: np.ndarray, relevant: np.ndarray) -> None:
        keep = relevant > 0
        hits = neighbor_labels[keep] == query_labels[keep][:, None]
        relevant = relevant[keep]
        ranks = np.arange(1, hits.shape[1] + 1)
        hits_in_r = hits & (ranks <= relevant[:, None])
        precision_sum = (np.cumsum(hits_in_r, axis=1) / ranks * hits_in_r).sum(axis=1)
        self.count += len(relevant)
        self.query_ap.append(precision_sum / relevant)
        self.map_at_r += float(self.query_ap[-1].sum())
        self.r_precision += float((hits_in_r.sum(axis=1) / relevant).sum())
        self.precision_at_1 += int(hits[:, 0].sum()) if hits.shape[1] else 0
        first_hit = np.where(hits.any(axis=1), hits.argmax(axis=1), hits.shape[1])
        for k in self.ks:
            self.recall[k] += int((first_hit < k).sum())

    def metrics(self, nmi: float | None) -> RetrievalMetrics:
        n = max(self.count, 1)
        recall = {k: hits / n for k, hits in self.recall.items()}
        query_ap = np.concatenate(self.query_ap) if self.query_ap else np.zeros(0)
        return RetrievalMetrics(
            self.map_at_r / n, self.r_precision / n, self.precision_at_1 / n, recall, nmi, self.count, query_ap
        )


@dataclass(frozen=True)
class _Search:
    queries: np.ndarray
    gallery: np.ndarray
    same_set: bool
    own: np.ndarray | None  # gallery position of each query (-1: not in the gallery)
    metric: Literal["ip", "hamming"]
    progress: bool


def _search_and_score(search: _Search, query_codes, gallery_codes, relevant, k: int, ks) -> _Sums:
    """Search only the queries with R > 0; same-set float search takes the symmetric path when
    all N x k results fit in memory, else queries stream through in chunks."""
    sums = _Sums(ks)
    valid = np.flatnonzero(relevant > 0)
    n = len(search.queries)
    if search.same_set and search.metric == "ip" and n * (k + 1) * 12 <= _SAME_SET_HEAP_BYTES:
        results = knn_search(search.queries, search.gallery, k, exclude_self=True, progress=search.progress)
        for start in range(0, len(valid), _score_chunk(k)):
            rows = valid[start : start + _score_chunk(k)]
            labels = SearchResults(results.ids[rows], results.scores[rows]).labels_of(gallery_codes)
            sums.add(labels, query_codes[rows], relevant[rows])
        return sums
    chunks = iter_knn_chunks(
        search.queries[valid],
        search.gallery,
        k,
        metric=search.metric,
        query_ids=None if search.own is None else search.own[valid],
        chunk_size=_score_chunk(k),
        progress=search.progress,
    )
    for start, results in chunks:
        rows = valid[start : start + len(results)]
        sums.add(results.labels_of(gallery_codes), query_codes[rows], relevant[rows])
    return sums


def _nmi(queries: np.ndarray, query_codes: np.ndarray, metric: str, seed: int) -> float:
    vectors = codes_to_signs(queries, queries.shape[1] * 8) if metric == "hamming" else queries
    return nmi_kmeans(vectors, query_codes, seed=seed)


def _score_chunk(k: int) -> int:
    return int(np.clip(_SCORE_ELEMENTS // max(k, 1), 1, 4096))


def _encode_labels(query_labels, gallery_labels) -> tuple[np.ndarray, np.ndarray]:
    """Map labels of any type (ints, strings) to 0..C-1, consistently across both sets."""
    if gallery_labels is None:
        raise DataError("a gallery was given without gallery_labels; pass both or neither.")
    query, gallery = np.asarray(query_labels).ravel(), np.asarray(gallery_labels).ravel()
    if _label_kind(query) != _label_kind(gallery):
        raise DataError(
            f"query labels are {_label_kind(query)} but gallery labels are {_label_kind(gallery)}; "
            "use one label type for both (1 and '1' would otherwise silently match)."
        )
    try:
        codes = np.unique(np.concatenate([query, gallery]), return_inverse=True)[1].ravel()
    except TypeError as error:
        raise DataError(f"labels must be all ints or all strings, not a mix ({error}).") from None
    return codes[: len(query)].astype(np.int64), codes[len(query) :].astype(np.int64)


def _label_kind(labels: np.ndarray) -> str:
    return {"i": "ints", "u": "ints", "b": "ints", "U": "strings", "S": "strings"}.get(labels.dtype.kind, "objects")


def _check_lengths(queries, query_codes, gallery, gallery_codes) -> None:
    if len(queries) != len(query_codes) or len(gallery) != len(gallery_codes):
        raise DataError(
            f"got {len(queries)} queries with {len(query_codes)} labels and {len(gallery)} gallery items with "
            f"{len(gallery_codes)} labels; each embedding needs exactly one label."
        )


def _check_own(own: np.ndarray | None, n_queries: int, n_gallery: int) -> np.ndarray | None:
    if own is None:
        return None
    own = np.asarray(own, dtype=np.int64)
    if own.shape != (n_queries,) or (own >= n_gallery).any() or (own < -1).any():
        raise DataError(f"query_gallery_ids must hold one gallery position (or -1) per query, got shape {own.shape}.")
    return own

"""The post-processing methods after the embedding, by name, and their parameters.

Names (``retrieval eval --postprocess``, ``retrieval search --postprocess``, the service's
``postprocess``): ``none`` (the raw embedding), ``qe`` (alpha-query expansion), ``dba``
(database-side augmentation), ``dba+qe`` (both) and ``kreciprocal`` (k-reciprocal re-ranking).
The defaults are the papers' settings: alpha = 3 for alpha-QE and alpha-DBA (Radenovic, Tolias and
Chum, TPAMI 2018), k1 = 20, k2 = 6, lambda = 0.3 for k-reciprocal re-ranking (Zhong et al., CVPR
2017); the number of neighbours n is the data's (10 here) and ``bench/bench_postprocess.py`` chooses
every value on validation classes. An index records the set it serves with (its manifest's
``postprocess``), including whether its vectors were augmented (``dba``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retrieval.indexing.common.errors import ConfigError

METHODS: tuple[str, ...] = ("none", "qe", "dba", "dba+qe", "kreciprocal")
"""Every method ``retrieval eval --postprocess`` measures."""
QUERY_METHODS: tuple[str, ...] = ("none", "qe", "kreciprocal")
"""The per-query methods a search can ask for (DBA is a property of the index, chosen at build time)."""


class QeParams(BaseModel):
    """alpha-QE: the query becomes the normalised sum of itself and its top ``n`` neighbours weighted
    by similarity^alpha (negative similarities count as 0)."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(10, ge=1, le=1000, description="neighbours added to the query")
    alpha: float = Field(3.0, ge=0, le=100, description="weight exponent (0: plain average query expansion)")


class DbaParams(BaseModel):
    """alpha-DBA: every gallery vector becomes the normalised sum of itself and its top ``n`` other gallery
    vectors weighted by similarity^alpha."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(10, ge=1, le=1000, description="gallery neighbours added to each gallery vector")
    alpha: float = Field(3.0, ge=0, le=100, description="weight exponent (0: plain average)")


class KReciprocalParams(BaseModel):
    """k-reciprocal re-ranking of each query's top ``candidates`` (Zhong et al.): Jaccard distance of
    k-reciprocal neighbour sets, mixed with the original distance."""

    model_config = ConfigDict(extra="forbid")

    k1: int = Field(20, ge=1, le=1000, description="k of the k-reciprocal neighbour sets")
    k2: int = Field(6, ge=1, le=1000, description="neighbours averaged in the local query expansion (1: none)")
    lam: float = Field(0.3, ge=0, le=1, description="lambda: weight of the original distance in the final one")
    candidates: int = Field(100, ge=2, le=10_000, description="top results re-ranked per query")


class PostprocessParams(BaseModel):
    """The parameters of every method (``--postprocess-params`` JSON, the index manifest's ``postprocess``)."""

    model_config = ConfigDict(extra="forbid")

    qe: QeParams = Field(default_factory=QeParams)
    dba: DbaParams = Field(default_factory=DbaParams)
    kreciprocal: KReciprocalParams = Field(default_factory=KReciprocalParams)


class IndexPostprocess(BaseModel):
    """An index manifest's ``postprocess``: the DBA its vectors were augmented with (None: raw vectors), and
    the parameters the per-query methods (``postprocess=qe``, ``kreciprocal``) search it with."""

    model_config = ConfigDict(extra="forbid")

    dba: DbaParams | None = None
    qe: QeParams = Field(default_factory=QeParams)
    kreciprocal: KReciprocalParams = Field(default_factory=KReciprocalParams)

    @classmethod
    def of(cls, params: PostprocessParams, *, dba: bool) -> IndexPostprocess:
        return cls(dba=params.dba if dba else None, qe=params.qe, kreciprocal=params.kreciprocal)

    def params(self) -> PostprocessParams:
        return PostprocessParams(qe=self.qe, dba=self.dba or DbaParams(), kreciprocal=self.kreciprocal)


def parse_methods(text: str, allowed: tuple[str, ...] = METHODS) -> tuple[str, ...]:
    """'none,qe,dba' -> ('none', 'qe', 'dba'), order kept, duplicates dropped; an unknown name is a
    ConfigError that lists the known ones."""
    names = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise ConfigError(f"unknown post-processing {', '.join(unknown) or repr(text)}; known: {', '.join(allowed)}")
    return names


def load_params(source: str | Path | None) -> PostprocessParams:
    """Parameters from a JSON object or a JSON file (what ``bench/bench_postprocess.py`` writes); None:
    the defaults. Unknown keys are refused with the key's name."""
    if source is None:
        return PostprocessParams()
    text = str(source)
    if not text.lstrip().startswith("{"):
        try:
            text = Path(text).read_text()
        except OSError as error:
            raise ConfigError(f"cannot read post-processing parameters from {source}: {error.strerror}") from None
    try:
        return PostprocessParams.model_validate(json.loads(text))
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"bad post-processing parameter {where}: {first['msg']}") from None
    except ValueError as error:
        raise ConfigError(f"post-processing parameters are not JSON ({error}): {text[:200]}") from None

"""``GET /audit``: the items of the index most likely mislabelled, page by page, the same rows as ``retrieval
index audit`` writes to ``label_issues.csv``. It calls ``indexing.audit.auditing`` (``AuditCache``: computed once
per state of the index, on the store thread; ``audit_page``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from retrieval.indexing.audit.auditing import AuditCache, audit_page
from retrieval.serving.api_models.schemas import AuditPage, AuditRow
from retrieval.serving.dependencies import Services, get_services
from retrieval.serving.http import api_examples
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import InvalidParameterError, RequestTimeoutError, RetryLaterError
from retrieval.serving.service_state import Snapshot

router = APIRouter(tags=["audit"])
MAX_AUDIT_PAGE = 500
_AUDITS = AuditCache()
_EXAMPLE = {
    "total": 5864,
    "offset": 0,
    "suspects": 1,
    "rows": [
        {
            "id": 412,
            "path": "/data/birds/012.Yellow_headed_Blackbird/0042.jpg",
            "key": None,
            "label": "012.Yellow_headed_Blackbird",
            "suggested_label": "011.Rusty_Blackbird",
            "score": 0.993,
        }
    ],
}


@router.get(
    "/audit",
    response_model=AuditPage,
    responses={
        **api_examples.example(_EXAMPLE),
        **problem_responses(InvalidParameterError, RetryLaterError, RequestTimeoutError),
    },
    summary="The items most likely mislabelled, most suspect first, page by page",
)
async def audit(
    offset: int = Query(0, ge=0, description="rows to skip"),
    limit: int = Query(50, ge=1, le=MAX_AUDIT_PAGE, description="rows per page"),
    services: Services = Depends(get_services),
) -> AuditPage:
    def rows(snapshot: Snapshot) -> AuditPage:
        report = _AUDITS.report(snapshot.store)
        found = audit_page(report, offset, limit)
        return AuditPage(
            total=found["total"],
            offset=offset,
            suspects=len(report.suspects()),
            rows=[AuditRow(**_shown(row, services.settings.shows_paths)) for row in found["rows"]],
        )

    return await services.state.read(rows)


def _shown(row: dict[str, object], shows_paths: bool) -> dict[str, object]:
    """The row, its path left out where the service hides paths (``--show-paths`` off)."""
    return row if shows_paths or "path" not in row else {**row, "path": None}

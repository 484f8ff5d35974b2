"""Every operation of the OpenAPI document, fuzzed with schemathesis against a real server: a client's input,
however malformed (wrong types, missing fields, odd strings, random bytes as images, unknown filter
operators), gets a 4xx answer, never a 5xx. Writes carry the API key, so the write paths are fuzzed too."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from serving_fixtures import API_KEY, running_server

EXAMPLES_PER_OPERATION = 20


@pytest.fixture(scope="module")
def fuzzed_server(tiny_index_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    index = Path(shutil.copytree(tiny_index_template, tmp_path_factory.mktemp("fuzz") / "index"))
    with running_server(index) as base:
        yield base


@pytest.fixture(scope="module")
def api_schema(fuzzed_server: str) -> schemathesis.schemas.BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzzed_server}/openapi.json")


def test_no_operation_answers_a_client_mistake_with_a_5xx(api_schema: schemathesis.schemas.BaseSchema) -> None:
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10  # the document lists the service's routes
    for operation in operations:
        _fuzz(operation, failures)
    assert not failures, "\n".join(failures[:5])


def _fuzz(operation: schemathesis.APIOperation, failures: list[str]) -> None:
    """Call ``operation`` with the examples hypothesis draws from its schema; note each 5xx."""

    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,  # the same examples on every run: a failure here is reproducible
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def call(case: schemathesis.Case) -> None:
        response = case.call(headers={"X-API-Key": API_KEY}, timeout=30)
        if response.status_code >= 500:
            failures.append(
                f"{case.method} {case.formatted_path} answered {response.status_code}: {response.text[:200]}; "
                f"reproduce: {case.as_curl_command({'X-API-Key': API_KEY})}"
            )

    call()

"""Schema-driven fuzzing (schemathesis) of every documented operation on a real web server process.

Each operation gets positive and negative generated requests, half of them with real ids of the
caller's own document and job. Every answer must not be a 5xx (checked on every example, and
never excused), and must match the schema: status code, content type, body and headers
(conformance failures are collected and the first is raised at the end).

Needs ``schemathesis`` (a test-only dependency): the module is skipped without it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Caller, Server

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase, given  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import FailureGroup  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

EXAMPLES = 30
CONFORMANCE = [
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


OPERATIONS = [
    pytest.param("GET", "/api/documents/", id="list"),
    pytest.param("POST", "/api/documents/", id="upload"),
    pytest.param("GET", "/api/documents/{document_id}/", id="detail"),
    pytest.param("PATCH", "/api/documents/{document_id}/", id="patch"),
    pytest.param("POST", "/api/documents/{document_id}/versions/", id="versions"),
    pytest.param("GET", "/api/documents/{document_id}/jobs/{job_id}", id="status"),
    pytest.param("POST", "/api/documents/{document_id}/jobs/{job_id}/cancel", id="cancel"),
    pytest.param("POST", "/api/documents/{document_id}/jobs/{job_id}/retry", id="retry"),
    pytest.param("GET", "/api/search", id="search"),
]


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_fuzzed_requests_get_no_server_error_and_answers_that_match_the_schema(
    server: Server, alice: Caller, method: str, path: str
):
    body = alice.uploaded()
    real_ids = {"document_id": body["document_id"], "job_id": body["job_id"]}
    schema_url = f"{server.base_url}/api/schema/"  # behind authentication (API_SCHEMA_PUBLIC unset)
    auth = {"Authorization": f"Token {alice.token}"}
    operation = schemathesis.openapi.from_url(schema_url, headers=auth)[path][method]
    cases = st.one_of(
        operation.as_strategy(schemathesis.GenerationMode.POSITIVE),
        operation.as_strategy(schemathesis.GenerationMode.NEGATIVE),
    )
    statuses: list[int] = []
    mismatches: list[FailureGroup] = []

    @hypothesis_settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same requests on every run
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases, use_real_ids=st.booleans())
    def run(case: Any, use_real_ids: bool) -> None:
        if use_real_ids and case.path_parameters:
            case.path_parameters = {name: real_ids[name] for name in case.path_parameters}
        response = case.call(base_url=server.base_url, headers={"Authorization": f"Token {alice.token}"})
        statuses.append(response.status_code)
        try:
            case.validate_response(response, checks=[not_a_server_error])
        except FailureGroup as failure:
            raise AssertionError(f"server error for {case.as_curl_command()}:\n{failure}") from None
        try:
            case.validate_response(response, checks=CONFORMANCE)
        except FailureGroup as failure:
            mismatches.append(failure)

    run()
    assert len(statuses) >= EXAMPLES // 2, statuses
    if mismatches:
        raise mismatches[0]

"""No input to the operator's routes causes a 500: arbitrary JSON bodies and query strings
get a 2xx or a 4xx with the one error shape."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.conftest import Api
from tests.integration.test_api import json_values

BODY_ROUTES = [
    "/api/v1/dead-letters/redrive",
    "/api/v1/endpoints",
    "/api/v1/endpoints/pypi/tokens",
]
QUERY_FIELDS = ["q", "reason", "since", "endpoint", "queue", "limit", "cursor"]
FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _shaped(response: Any) -> None:
    assert 200 <= response.status_code < 500, response.text
    if response.status_code >= 400:
        assert set(response.json()) == {"error", "detail"}


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@FUZZ
@given(route=st.sampled_from(BODY_ROUTES), body=json_values)
def test_no_operator_body_causes_a_500(api: Api, route: str, body: Any) -> None:
    _shaped(api.post(route, api.owner, body))


# Both databases: PostgreSQL refuses text that SQLite takes (a NUL character).
@FUZZ
@given(
    params=st.dictionaries(st.sampled_from(QUERY_FIELDS), st.text(max_size=40), max_size=4),
    path=st.sampled_from(["/api/v1/dead-letters", "/api/v1/audit"]),
)
def test_no_listing_query_causes_a_500(api: Api, params: dict[str, str], path: str) -> None:
    _shaped(api.get(f"{path}?{urlencode(params)}", api.owner))


def test_a_nul_in_the_search_is_refused_not_a_500(api: Api) -> None:
    response = api.get("/api/v1/dead-letters?q=a%00b", api.owner)
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "query.q"


def test_out_of_range_ids_and_names_are_4xx(api: Api) -> None:
    for path in (
        "/api/v1/audit?cursor=99999999999999999999",
        "/api/v1/endpoints/a%00b/tokens",
        "/api/v1/dead-letters?cursor=9999999999999999999-9",
        "/api/v1/dead-letters?endpoint=a%00",
    ):
        response = api.get(path, api.owner)
        assert 400 <= response.status_code < 500, path
        assert set(response.json()) == {"error", "detail"}, path
    body = {"worker": "w\u0000"}
    assert api.post("/api/v1/endpoints/pypi/tokens", api.owner, body).status_code == 422

"""Input that used to cost a 500 or was quietly altered (docs/reliability.md): each gets a 4xx
naming the field, nothing is stored, and the same on both databases."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
import structlog

from tests.integration.conftest import Api

DEEP = "[" * 260 + "]" * 260
# (raw JSON of the value, what the refusal says)
UNSTORABLE = [
    ("NaN", "NaN and infinite"),
    ("Infinity", "NaN and infinite"),
    ("-Infinity", "NaN and infinite"),
    ("1e400", "NaN and infinite"),
    ('{"deep": [1.5, NaN]}', "NaN and infinite"),
    ("18446744073709551616", "64 bits"),
    ("1" + "0" * 400, "64 bits"),
    ('"\\ud800"', "Unicode"),
    ('{"k": ["ok", "\\udfff"]}', "Unicode"),
    (DEEP, "nested deeper"),
]


def post_raw(api: Api, path: str, token: str, raw: str) -> Any:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    return api.client.post(path, content=raw.encode(), headers=headers)


def listed(api: Api) -> list[dict[str, Any]]:
    scans: list[dict[str, Any]] = api.get("/api/v1/scans", api.owner).json()["scans"]
    return scans


@pytest.mark.parametrize(("value", "says"), UNSTORABLE)
def test_a_payload_that_cannot_round_trip_is_refused_and_not_stored(
    api: Api, value: str, says: str
) -> None:
    raw = f'{{"name": "x", "version": "1", "payload": {value}}}'
    response = post_raw(api, "/api/v1/scans", api.source, raw)
    assert response.status_code == 422, response.text
    [problem] = response.json()["detail"]
    assert problem["field"] == "body.payload" and says in problem["message"]
    assert listed(api) == []


@pytest.mark.parametrize(("value", "says"), UNSTORABLE)
def test_a_result_that_cannot_round_trip_is_refused_and_the_lease_kept(
    api: Api, value: str, says: str
) -> None:
    api.submit()
    [job] = api.lease()
    echo = f'"attempt": 1, "assignment_id": "{job["assignment_id"]}"'
    raw = f'{{"outcome": "finished", {echo}, "result": {value}}}'
    response = post_raw(api, f"/api/v1/jobs/{job['scan_id']}/result", api.worker, raw)
    # pydantic-core's parser refuses lone surrogates and deep nesting as JSON itself (400).
    assert response.status_code in (400, 422), response.text
    if response.status_code == 422:
        [problem] = response.json()["detail"]
        assert problem["field"] == "body.result" and says in problem["message"]
    assert [s["status"] for s in listed(api)] == ["PENDING"]
    retry = {"outcome": "finished", "attempt": 1, "assignment_id": job["assignment_id"]}
    assert api.post(f"/api/v1/jobs/{job['scan_id']}/result", api.worker, retry).status_code == 200


def test_a_64_bit_integer_is_stored_exactly(api: Api) -> None:
    scan = api.submit(payload={"big": 2**64 - 1, "small": -(2**63)})
    assert scan["payload"] == {"big": 2**64 - 1, "small": -(2**63)}


@pytest.mark.parametrize("field", ["name", "version"])
def test_a_nul_character_is_refused_on_both_databases(api: Api, field: str) -> None:
    body = {"name": "x", "version": "1", field: "a\x00b"}
    response = api.post("/api/v1/scans", api.source, body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["field"] == f"body.{field}"
    assert listed(api) == []


def test_a_nul_in_a_summary_is_refused_and_the_lease_kept(api: Api) -> None:
    api.submit()
    [job] = api.lease()
    body = {
        "outcome": "failed",
        "attempt": 1,
        "assignment_id": job["assignment_id"],
        "summary": "bad\x00byte",
    }
    response = api.post(f"/api/v1/jobs/{job['scan_id']}/result", api.worker, body)
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "body.summary"
    assert [s["status"] for s in listed(api)] == ["PENDING"]


@pytest.mark.parametrize("cursor", ["%C2%B2", "%D9%A3", "1%20", "-1", "1" * 19])
@pytest.mark.parametrize("route", ["/api/v1/scans", "/api/v1/dead-letters"])
def test_a_cursor_takes_ascii_digits_only(api: Api, route: str, cursor: str) -> None:
    response = api.get(f"{route}?cursor={cursor}", api.owner)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["field"] == "query.cursor"


@pytest.mark.parametrize("path", ["/api/v1/scans/1%20", "/api/v1/scans/%D9%A3", "/api/v1/scans/+1"])
def test_a_path_id_takes_ascii_digits_only(api: Api, path: str) -> None:
    api.submit()
    response = api.get(path, api.owner)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["field"] == "path.scan_id"


def test_a_body_nested_past_the_parser_is_a_400_in_the_one_shape(api: Api) -> None:
    raw = '{"name": "x", "version": "1", "payload": ' + "[" * 5000 + "]" * 5000 + "}"
    response = post_raw(api, "/api/v1/scans", api.source, raw)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_json"


def test_an_unexpected_exception_is_one_log_line_and_a_json_500(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    # A route of the real app's stack; the TestClient re-raises anything that escapes it.
    api.client.app.add_api_route("/broken", broken)  # type: ignore[attr-defined]
    with structlog.testing.capture_logs() as events, caplog.at_level(logging.ERROR):
        first = api.client.get("/broken")
        second = api.client.get("/broken")
    assert first.status_code == second.status_code == 500
    assert first.json() == {
        "error": "internal_error",
        "detail": "unexpected server error; it has been logged",
    }
    errors = [e for e in events if e["event"] == "unhandled_error"]
    assert len(errors) == 2 and all(isinstance(e["exc_info"], RuntimeError) for e in errors)
    assert caplog.records == []  # nothing else logged it a second time


def test_the_document_states_the_bounds_the_server_enforces(api: Api) -> None:
    """Parameter bounds in standard JSON Schema keys, so a client (or schemathesis) that
    follows the document never sends what the server refuses."""
    document = api.client.get("/openapi.json").json()
    parameters = [
        p
        for route in document["paths"].values()
        for op in route.values()
        for p in op.get("parameters", [])
    ]
    assert not [p["name"] for p in parameters if {"ge", "le", "gt", "lt"} & set(p["schema"])]
    scan_ids = [p["schema"] for p in parameters if p["name"] == "scan_id"]
    assert scan_ids and all(s["minimum"] == 1 and s["maximum"] == 2**62 for s in scan_ids)


def test_a_wrong_method_names_every_method_the_path_allows(api: Api) -> None:
    response = api.client.request("OPTIONS", "/api/v1/scans")
    assert response.status_code == 405 and response.json()["error"] == "method_not_allowed"
    assert response.headers["allow"] == "GET, POST"


# Every method a client might send; HTTP's others are refused the same way.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def test_every_documented_path_serves_its_methods_and_refuses_the_rest(api: Api) -> None:
    """A wrong method on any path of the document is a JSON 405 whose Allow is the document's
    methods for that path, which are the methods it does not answer with a 405."""
    headers = {"Authorization": f"Bearer {api.owner}"}  # past authentication, to validation
    paths: dict[str, dict[str, Any]] = api.client.get("/openapi.json").json()["paths"]
    for template, operations in paths.items():
        path = re.sub(r"{[^}]+}", "1", template)  # 1 fits every parameter: an id, a name
        documented = {method.upper() for method in operations}
        served = set()  # the methods not answered with a 405
        for method in METHODS:
            response = api.client.request(method, path, headers=headers)
            assert response.status_code < 500, (method, path, response.text)
            if response.status_code != 405:
                served.add(method)
                continue
            if method != "HEAD":  # a reply to HEAD has no body
                assert response.json()["error"] == "method_not_allowed", (method, path)
            allowed = set(response.headers["allow"].split(", "))
            assert allowed == documented, (method, path, allowed)
        assert served == documented, path


def test_a_literal_path_refuses_the_method_its_templated_neighbour_takes(api: Api) -> None:
    # GET /api/v1/scans/batch reaches GET /api/v1/scans/{scan_id}, which fails on "batch".
    response = api.get("/api/v1/scans/batch", api.owner)
    assert response.status_code == 405 and response.json()["error"] == "method_not_allowed"
    assert response.headers["allow"] == "POST"
    assert api.get("/api/v1/scans/abc", api.owner).status_code == 422  # no literal path there


def test_a_route_outside_the_document_allows_what_its_router_adds(api: Api) -> None:
    # Starlette serves HEAD beside GET for its own routes; FastAPI's routes serve GET alone.
    assert api.client.head("/openapi.json").status_code == 200
    response = api.client.delete("/openapi.json")
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"GET", "HEAD"}
    assert api.client.delete("/docs").headers["allow"] == "GET"

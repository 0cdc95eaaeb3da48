"""The HTTP contract, in process: status codes, error bodies, and that no input causes a 500."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.conftest import Api


def test_submit_lease_result_round_trip(api: Api) -> None:
    scan = api.submit(payload={"urls": ["https://files/x.whl"]})
    assert scan["status"] == "QUEUED" and scan["verified"] is True
    again = api.post("/api/v1/scans", api.source, {"name": "pkg", "version": "1"})
    assert again.status_code == 200 and again.json()["scan_id"] == scan["scan_id"]
    [job] = api.lease(batch=10)
    assert job["payload"] == {"urls": ["https://files/x.whl"]} and job["attempt"] == 1
    assert job["lease_expires_at"].endswith("Z")
    done = api.post(
        f"/api/v1/jobs/{job['scan_id']}/result",
        api.worker,
        {
            "outcome": "finished",
            "attempt": 1,
            "assignment_id": job["assignment_id"],
            "summary": "clean",
            "result": {"verdict": "benign"},
        },
    )
    assert done.status_code == 200 and done.json()["status"] == "FINISHED"
    view = api.get(f"/api/v1/scans/{scan['scan_id']}", api.owner).json()
    assert view["result"] == {"verdict": "benign"}
    assert view["attempts"][0]["outcome"] == "finished"


def test_stale_result_is_409_with_a_code(api: Api) -> None:
    api.submit()
    [job] = api.lease()
    body = {"outcome": "finished", "attempt": 1, "assignment_id": "wrong"}
    response = api.post(f"/api/v1/jobs/{job['scan_id']}/result", api.worker, body)
    assert response.status_code == 409
    assert response.json()["error"] == "stale_assignment" and response.json()["detail"]


def test_a_replay_gets_the_first_answer_and_other_content_a_conflict(api: Api) -> None:
    for name in ("a", "b", "c"):
        api.submit(name)
    [job] = api.lease()
    path = f"/api/v1/jobs/{job['scan_id']}/result?next=1"
    echo = {"attempt": 1, "assignment_id": job["assignment_id"]}
    body = echo | {"outcome": "failed", "retryable": False, "result": {"b": 1, "a": 2}}
    first = api.post(path, api.worker, body)
    assert first.status_code == 200 and len(first.json()["next"]) == 1
    # The same content, spelled with its keys in another order: a replay, same jobs.
    replay = api.post(path, api.worker, body | {"result": {"a": 2, "b": 1}})
    assert replay.json() == first.json()
    conflict = api.post(path, api.worker, echo | {"outcome": "finished"})
    assert conflict.status_code == 409, conflict.text
    answer = conflict.json()
    assert answer["error"] == "result_conflict" and "nothing was changed" in answer["detail"]
    assert answer["accepted"] == {
        "outcome": "failed",
        "status": "FAILED",
        "fail_reason": "failed",
        "accepted_at": first.json()["finished_at"],
    }
    assert "next" not in answer, "a refused result leases nothing"
    view = api.get(f"/api/v1/scans/{job['scan_id']}", api.owner).json()
    assert (view["status"], view["result"]) == ("FAILED", {"a": 2, "b": 1})
    batch = api.post(
        "/api/v1/jobs/results?next=1",
        api.worker,
        {"results": [echo | {"scan_id": job["scan_id"], "outcome": "finished"}]},
    ).json()
    [item] = batch["results"]
    assert (item["status"], item["error"]) == (409, "result_conflict")
    assert item["accepted"] == answer["accepted"] and batch["next"] == []
    assert len(api.lease(batch=5)) == 1, "only the scan nobody has leased yet is left"


def test_one_echo_field_without_the_other_is_422(api: Api) -> None:
    api.submit()
    [job] = api.lease()
    response = api.post(
        f"/api/v1/jobs/{job['scan_id']}/result", api.worker, {"outcome": "finished", "attempt": 1}
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "body.assignment_id"


def test_batch_results_report_each_item(api: Api) -> None:
    api.submit("a")
    api.submit("b")
    jobs = api.lease(batch=2)
    items = [
        {
            "scan_id": j["scan_id"],
            "outcome": "finished",
            "attempt": j["attempt"],
            "assignment_id": j["assignment_id"],
        }
        for j in jobs
    ]
    items.append(
        {
            "scan_id": jobs[0]["scan_id"],
            "outcome": "finished",
            "attempt": 1,
            "assignment_id": jobs[0]["assignment_id"],
        }
    )
    items.append({"scan_id": 999999, "outcome": "finished"})
    items.append({"scan_id": jobs[1]["scan_id"], "outcome": "failed", "attempt": 1})
    response = api.post("/api/v1/jobs/results", api.worker, {"results": items})
    assert response.status_code == 200
    statuses = [(r["status"], r.get("error")) for r in response.json()["results"]]
    assert statuses == [
        (200, None),
        (200, None),
        (409, "already_terminal"),
        (404, "not_found"),
        (422, "invalid_request"),
    ]


def test_other_owners_and_endpoints_objects_are_404(api: Api) -> None:
    scan = api.submit()
    assert api.get(f"/api/v1/scans/{scan['scan_id']}", api.other_owner).status_code == 404
    assert api.lease(api.other_worker) == []
    response = api.post(
        f"/api/v1/jobs/{scan['scan_id']}/result", api.other_worker, {"outcome": "finished"}
    )
    assert response.status_code == 404
    assert api.post("/api/v1/endpoints/pypi/revoke", api.other_owner).status_code == 404
    listing = api.get("/api/v1/scans", api.other_owner).json()
    assert listing["scans"] == []


def test_tokens_are_checked(api: Api) -> None:
    assert api.post("/api/v1/jobs", None).status_code == 401
    assert api.post("/api/v1/jobs", "mfw_nonsense").status_code == 401
    assert api.post("/api/v1/jobs", api.owner).status_code == 401
    assert api.get("/api/v1/scans", api.worker).status_code == 401
    assert api.post("/api/v1/scans", api.worker, {"name": "x", "version": "1"}).status_code == 401
    body = api.post("/api/v1/jobs", "bad").json()
    assert body["error"] == "unauthorized"


def test_revocation_refuses_credentials_at_once(api: Api) -> None:
    api.submit()
    [job] = api.lease()
    revoked = api.post("/api/v1/endpoints/pypi/revoke", api.owner)
    assert revoked.status_code == 200 and revoked.json()["dead_lettered"] == 1
    assert api.post("/api/v1/jobs", api.worker).status_code == 401
    result = api.post(
        f"/api/v1/jobs/{job['scan_id']}/result",
        api.worker,
        {"outcome": "finished", "attempt": 1, "assignment_id": job["assignment_id"]},
    )
    assert result.status_code == 401
    assert api.post("/api/v1/scans", api.source, {"name": "n", "version": "1"}).status_code == 401
    owner_submit = api.post(
        "/api/v1/scans", api.owner, {"name": "n", "version": "1", "endpoint": "pypi"}
    )
    assert owner_submit.status_code == 409 and owner_submit.json()["error"] == "endpoint_revoked"


def test_open_intake_quarantines_anonymous_submissions(api: Api) -> None:
    response = api.post("/api/v1/scans", None, {"name": "anon", "version": "1", "endpoint": "pypi"})
    assert response.status_code == 201 and response.json()["status"] == "QUARANTINED"
    closed = api.post("/api/v1/scans", None, {"name": "anon", "version": "1", "endpoint": "evil"})
    assert closed.status_code == 401
    assert api.lease() == []
    scan_id = response.json()["scan_id"]
    released = api.post(f"/api/v1/quarantine/{scan_id}/release", api.owner)
    assert released.status_code == 200 and released.json()["status"] == "QUEUED"
    assert api.post(f"/api/v1/quarantine/{scan_id}/release", api.owner).status_code == 409
    assert [j["scan_id"] for j in api.lease()] == [scan_id]


def test_listing_is_keyset_paged(api: Api) -> None:
    ids = [api.submit(f"p{i}")["scan_id"] for i in range(5)]
    seen: list[int] = []
    cursor = ""
    while True:
        page = api.get(f"/api/v1/scans?limit=2{cursor}", api.owner).json()
        seen += [s["scan_id"] for s in page["scans"]]
        if page["next_cursor"] is None:
            break
        cursor = f"&cursor={page['next_cursor']}"
    assert seen == sorted(ids, reverse=True)
    queued = api.get("/api/v1/scans?status=QUEUED", api.owner).json()["scans"]
    assert len(queued) == 5
    assert api.get("/api/v1/scans?status=BOGUS", api.owner).status_code == 422
    assert api.get("/api/v1/scans?cursor=abc", api.owner).status_code == 422


def test_dead_letters_are_listed_for_their_owner_only(api: Api) -> None:
    plain = api.submit("plain")
    doomed = api.submit("doomed")
    jobs = {j["scan_id"]: j for j in api.lease(batch=2)}
    body = {
        "outcome": "failed",
        "retryable": False,
        "attempt": 1,
        "assignment_id": jobs[plain["scan_id"]]["assignment_id"],
    }
    api.post(f"/api/v1/jobs/{plain['scan_id']}/result", api.worker, body)
    for _ in range(3):
        failed = api.post(f"/api/v1/scans/{doomed['scan_id']}/fail", api.owner, {})
        if failed.json()["status"] == "QUEUED":
            api.lease()
    listing = api.get("/api/v1/dead-letters", api.owner).json()
    assert [s["scan_id"] for s in listing["scans"]] == [doomed["scan_id"]]
    assert listing["scans"][0]["fail_reason"] == "attempts_exhausted"
    assert api.get("/api/v1/dead-letters", api.other_owner).json()["scans"] == []


def test_bad_input_gets_clear_4xx(api: Api) -> None:
    raw = api.client.post(
        "/api/v1/scans",
        content=b"{not json",
        headers={"Authorization": f"Bearer {api.source}", "Content-Type": "application/json"},
    )
    assert raw.status_code == 400 and raw.json()["error"] == "invalid_json"
    huge = api.client.post(
        "/api/v1/scans", content=b"x" * 2_000_000, headers={"Authorization": f"Bearer {api.source}"}
    )
    assert huge.status_code == 413
    wrong = api.post("/api/v1/scans", api.source, {"name": 5, "version": "1"})
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["field"] == "body.name"
    assert api.post("/api/v1/jobs?batch=0", api.worker).status_code == 422
    assert api.post("/api/v1/jobs?batch=101", api.worker).status_code == 422
    assert api.post("/api/v1/jobs/abc/result", api.worker, {"outcome": "x"}).status_code == 422
    assert api.post(f"/api/v1/jobs/{2**70}/heartbeat", api.worker, {}).status_code == 422
    payload = api.post(
        "/api/v1/scans", api.source, {"name": "big", "version": "1", "payload": "y" * 70_000}
    )
    assert payload.status_code == 422


def test_openapi_documents_every_route(api: Api) -> None:
    spec = api.client.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {
        "/api/v1/scans",
        "/api/v1/jobs",
        "/api/v1/jobs/results",
        "/api/v1/jobs/{scan_id}/result",
        "/api/v1/jobs/{scan_id}/heartbeat",
        "/api/v1/jobs/{scan_id}/wait",
        "/api/v1/jobs/{scan_id}/resume",
        "/api/v1/scans/{scan_id}",
        "/api/v1/scans/{scan_id}/fail",
        "/api/v1/endpoints/{name}/revoke",
        "/api/v1/quarantine/{scan_id}/release",
        "/healthz",
    } <= paths
    assert api.client.get("/docs").status_code == 200


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
ROUTES = [
    "/api/v1/scans",
    "/api/v1/jobs/results",
    "/api/v1/jobs/1/result",
    "/api/v1/jobs/1/heartbeat",
    "/api/v1/jobs/1/wait",
    "/api/v1/jobs/1/resume",
    "/api/v1/scans/1/fail",
    "/api/v1/jobs?batch=3",
]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    route=st.sampled_from(ROUTES),
    body=json_values,
    who=st.sampled_from(["owner", "source", "worker", "none"]),
)
def test_no_body_causes_a_500(api: Api, route: str, body: Any, who: str) -> None:
    token = {"owner": api.owner, "source": api.source, "worker": api.worker, "none": None}[who]
    response = api.post(route, token, body)
    assert 200 <= response.status_code < 500, response.text
    if response.status_code >= 400:
        assert set(response.json()) == {"error", "detail"}


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": "x", "version": "1", "payload": NaN}',
        b'{"name": "x", "version": "1", "payload": Infinity}',
        b"[1, 2",
        b"\xff\xfe",
        b'"just a string"',
        b"null",
        b'{"name": "\\ud800", "version": "1"}',
    ],
)
def test_odd_json_is_refused_or_stored_cleanly(api: Api, raw: bytes) -> None:
    response = api.client.post(
        "/api/v1/scans",
        content=raw,
        headers={"Authorization": f"Bearer {api.source}", "Content-Type": "application/json"},
    )
    assert 200 <= response.status_code < 500, response.text

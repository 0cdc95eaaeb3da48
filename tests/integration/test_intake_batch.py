"""Bulk intake, `POST /api/v1/scans/batch`: one status per item in request order, items
independent, the single route's authorization and quarantine rules, and its limits."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Api

BATCH = "/api/v1/scans/batch"


def items(*names: str) -> list[dict[str, Any]]:
    return [{"name": name, "version": "1"} for name in names]


def test_each_item_gets_the_status_the_single_route_would_give(api: Api) -> None:
    existing = api.submit("old")
    body = {
        "scans": [
            {"name": "a", "version": "1", "queue": "npm", "payload": {"u": 1}},
            {"name": "old", "version": "1"},
            {"name": "", "version": "1"},
            {"name": "a", "version": "1"},
            {"name": "b", "version": "2", "kind": "bad kind!"},
            {"name": "c", "version": "1", "extra": True},
        ]
    }
    reply = api.post(BATCH, api.source, body)
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert [r["status"] for r in results] == [201, 200, 422, 200, 422, 422]
    assert results[1]["scan_id"] == existing["scan_id"]
    assert results[3]["scan_id"] == results[0]["scan_id"], "a duplicate in the batch is live"
    assert results[2]["error"] == "invalid_request"
    assert results[2]["detail"][0]["field"] == "body.scans.2.name"
    assert results[4]["detail"][0]["field"] == "body.scans.4.kind"
    assert results[5]["detail"][0]["field"] == "body.scans.5.extra"
    scan = api.get(f"/api/v1/scans/{results[0]['scan_id']}", api.owner).json()
    assert (scan["queue"], scan["payload"], scan["verified"]) == ("npm", {"u": 1}, True)
    jobs = api.lease(batch=10)
    assert sorted(j["name"] for j in jobs) == ["a", "old"], "nothing invalid was stored"


def test_limits_refuse_the_envelope_and_store_nothing(api: Api) -> None:
    empty = api.post(BATCH, api.source, {"scans": []})
    assert empty.status_code == 422 and empty.json()["detail"][0]["field"] == "body.scans"
    over = api.post(BATCH, api.source, {"scans": items(*(f"p{i}" for i in range(1001)))})
    assert over.status_code == 422
    not_json = api.client.post(
        BATCH,
        content=b"[",
        headers={"Authorization": f"Bearer {api.source}", "Content-Type": "application/json"},
    )
    assert not_json.status_code == 400
    assert api.lease(batch=10) == []
    full = api.post(BATCH, api.source, {"scans": items(*(f"p{i}" for i in range(1000)))})
    assert full.status_code == 200 and {r["status"] for r in full.json()["results"]} == {201}


def test_anonymous_batches_land_in_quarantine_on_open_intake_only(api: Api) -> None:
    reply = api.post(BATCH, None, {"endpoint": "pypi", "scans": items("anon1", "anon2")})
    assert reply.status_code == 200
    for result in reply.json()["results"]:
        scan = api.get(f"/api/v1/scans/{result['scan_id']}", api.owner).json()
        assert scan["status"] == "QUARANTINED" and scan["verified"] is False
    assert api.lease(batch=10) == []
    closed = api.post(BATCH, None, {"endpoint": "evil", "scans": items("x")})
    assert closed.status_code == 401


def test_authorization_is_the_single_routes(api: Api) -> None:
    assert api.post(BATCH, api.worker, {"scans": items("w")}).status_code == 401
    owner_without = api.post(BATCH, api.owner, {"scans": items("o")})
    assert owner_without.status_code == 422
    assert owner_without.json()["detail"][0]["field"] == "body.endpoint"
    owned = api.post(BATCH, api.owner, {"endpoint": "pypi", "scans": items("o")})
    assert owned.status_code == 200 and owned.json()["results"][0]["status"] == 201
    scan = api.get(f"/api/v1/scans/{owned.json()['results'][0]['scan_id']}", api.owner).json()
    assert scan["verified"] is False, "an owner's submission is not verified"
    theirs = api.post(BATCH, api.other_owner, {"endpoint": "pypi", "scans": items("m")})
    assert theirs.status_code == 404
    elsewhere = api.post(BATCH, api.source, {"endpoint": "evil", "scans": items("s")})
    assert elsewhere.status_code == 422
    assert api.post(BATCH, "mfs_not-a-token", {"scans": items("s")}).status_code == 401

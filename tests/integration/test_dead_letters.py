"""The operator's dead letters over HTTP, on SQLite and PostgreSQL: the listing (isolation,
quarantine, order, pages, filters, count), redrive (ids, filter, confirm, skips, audit) and
the overview whose Dead count is the listing's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mainframe.api.app import build_runtime, create_app
from mainframe.clock import FakeClock
from mainframe.settings import Settings
from mainframe.store.operator import redrive as redrive_module
from mainframe.store.operator.dead_letters import DeadLetterFilter
from tests.blocking import Blocking
from tests.integration.conftest import add_endpoint, issue


@dataclass
class Desk:
    client: TestClient
    store: Any  # the app's Store as a blocking proxy on the app's own loop (tests/blocking.py)
    clock: FakeClock
    alice: str
    mallory: str
    source: str
    worker: str
    evil_worker: str

    def call(self, method: str, path: str, token: str | None, body: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.request(method, path, json=body, headers=headers)

    def ok(self, method: str, path: str, token: str | None, body: Any = None) -> Any:
        response = self.call(method, path, token, body)
        assert response.status_code in (200, 201), response.text
        return response.json()

    def dead(self, name: str, *, queue: str = "default", kind: str = "scan") -> int:
        """Submit a scan as the source, lease it and fail its only attempt: a dead letter."""
        body = {"name": name, "version": "1", "queue": queue, "kind": kind}
        scan = self.ok("POST", "/api/v1/scans", self.source, body)
        return self.fail_only_attempt(scan["scan_id"], self.worker, f"boom {name}")

    def fail_only_attempt(self, scan_id: int, worker: str, summary: str) -> int:
        [job] = self.ok("POST", "/api/v1/jobs", worker)
        assert job["scan_id"] == scan_id
        result = {
            "outcome": "failed",
            "attempt": job["attempt"],
            "assignment_id": job["assignment_id"],
            "summary": summary,
            "artifact": "s3://logs/x",
        }
        done = self.ok("POST", f"/api/v1/jobs/{scan_id}/result", worker, result)
        assert done["dead_lettered_at"] is not None
        self.clock.advance(1)
        return scan_id

    def listing(self, query: str = "", token: str | None = None) -> dict[str, Any]:
        found: dict[str, Any] = self.ok("GET", f"/api/v1/dead-letters{query}", token or self.alice)
        return found

    def ids(self, query: str = "", token: str | None = None) -> list[int]:
        return [s["scan_id"] for s in self.listing(query, token)["scans"]]

    def redrives(self, token: str) -> list[dict[str, Any]]:
        """The owner's redrives in the audit trail (setting the desk up audits more)."""
        entries = self.ok("GET", "/api/v1/audit", token)["entries"]
        return [e for e in entries if e["action"] == "redrive"]


@contextmanager
def open_desk(settings: Settings, *, base_url: str = "http://testserver") -> Iterator[Desk]:
    """An in-process app with two owners: alice (pypi open, npm closed) and mallory (evil)."""
    clock = FakeClock()
    app = create_app(settings, runtime=build_runtime(settings, clock=clock), sweeper=False)
    with TestClient(app, base_url=base_url) as client:
        # The store runs on the app's loop: PostgreSQL's pool belongs to the loop it opened on.
        assert client.portal is not None
        store = Blocking(app.state.runtime.store, client.portal)
        alice = store.owners.create_owner("alice")
        mallory = store.owners.create_owner("mallory")
        add_endpoint(store, "alice", "pypi", open_intake=True)
        add_endpoint(store, "alice", "npm", open_intake=False)
        add_endpoint(store, "mallory", "evil", open_intake=False)
        source = issue(store, "pypi", "source", "feed")
        worker = issue(store, "pypi", "worker", "w1")
        evil_worker = issue(store, "evil", "worker", "w9")
        yield Desk(client, store, clock, alice, mallory, source, worker, evil_worker)


@pytest.fixture
def desk(database_url: str) -> Iterator[Desk]:
    settings = Settings(
        database_url=database_url, job_timeout=30, max_job_attempts=1, retry_base_seconds=0
    )
    with open_desk(settings) as opened:
        yield opened


def _mallory_dead(desk: Desk, name: str) -> int:
    body = {"name": name, "version": "1", "endpoint": "evil"}
    scan = desk.ok("POST", "/api/v1/scans", desk.mallory, body)
    return desk.fail_only_attempt(scan["scan_id"], desk.evil_worker, "theirs")


def test_listing_is_the_owners_alone_and_excludes_quarantine(desk: Desk) -> None:
    mine = desk.dead("requests")
    theirs = _mallory_dead(desk, "requests")
    anonymous = {"name": "drive-by", "version": "1", "endpoint": "pypi"}
    desk.ok("POST", "/api/v1/scans", None, anonymous)  # open intake: QUARANTINED
    page = desk.listing()
    assert [s["scan_id"] for s in page["scans"]] == [mine] and page["count"] == 1
    [item] = page["scans"]
    assert item["fail_reason"] == "attempts_exhausted"
    final = item["final_attempt"]
    assert final["seq"] == 1 and final["outcome"] == "failed" and final["worker"] == "w1"
    assert final["summary"] == "boom requests" and final["artifact"] == "s3://logs/x"
    assert final["at"].endswith("Z")
    assert desk.ids(token=desk.mallory) == [theirs]
    # Naming another owner's endpoint or id finds nothing, not an error that reveals it.
    assert desk.listing("?endpoint=evil")["count"] == 0
    assert desk.ids(f"?q={theirs}") == []


def test_order_and_pages_hold_while_new_dead_letters_arrive(desk: Desk) -> None:
    first = [desk.dead(f"pkg-{i}") for i in range(5)]
    page1 = desk.listing("?limit=2")
    assert [s["scan_id"] for s in page1["scans"]] == [first[4], first[3]]
    newer = desk.dead("late-arrival")
    page2 = desk.listing(f"?limit=2&cursor={page1['next_cursor']}")
    page3 = desk.listing(f"?limit=2&cursor={page2['next_cursor']}")
    seen = [s["scan_id"] for s in page1["scans"] + page2["scans"] + page3["scans"]]
    assert seen == list(reversed(first))
    assert page3["next_cursor"] is None and page3["count"] == 6
    assert desk.ids("?limit=1") == [newer]


def test_each_filter_narrows_the_listing_and_its_count(desk: Desk) -> None:
    a = desk.dead("left-pad", queue="priority", kind="malware")
    b = desk.dead("leftpad-ng")
    since = desk.listing()["scans"][0]["dead_lettered_at"]
    c = desk.dead("other")
    # A lapsed final lease: a second reason.
    d = desk.ok("POST", "/api/v1/scans", desk.source, {"name": "slow", "version": "1"})["scan_id"]
    desk.ok("POST", "/api/v1/jobs", desk.worker)
    desk.clock.advance(31)
    desk.store.leasing.sweep()
    cases = {
        "?q=LEFT": [b, a],
        "?q=pad-NG": [b],
        "?q=nothing-like-it": [],
        "?q=it's%5C'%20OR%201=1--": [],  # quotes and backslashes stay text
        "?q=left-": [a],
        "?q=malware": [a],
        "?q=feed": [d, c, b, a],
        f"?q={c}": [c],
        "?q=%25": [],  # a literal percent sign, not a wildcard
        "?q=%C2%B2": [],  # a digit to str.isdigit, not to int(): text, not an id
        "?reason=lease_expired": [d],
        "?reason=attempts_exhausted&queue=priority": [a],
        f"?since={since}": [d, c, b],
        "?endpoint=pypi&limit=1": [d],
        "?endpoint=npm": [],
    }
    for query, expected in cases.items():
        page = desk.listing(query)
        assert [s["scan_id"] for s in page["scans"]] == expected, query
        assert page["count"] == (4 if query.startswith("?endpoint=pypi") else len(expected))


def test_bad_listing_input_is_422_naming_the_field(desk: Desk) -> None:
    for query, field in [
        ("?cursor=abc", "query.cursor"),
        ("?since=yesterday", "query.since"),
        ("?since=2026-01-01T00:00:00", "query.since"),
        ("?reason=bored", "query.reason"),
        ("?limit=0", "query.limit"),
        ("?q=" + "x" * 301, "query.q"),
    ]:
        response = desk.call("GET", f"/api/v1/dead-letters{query}", desk.alice)
        assert response.status_code == 422, query
        assert response.json()["detail"][0]["field"] == field, query
    assert desk.call("GET", "/api/v1/dead-letters", desk.worker).status_code == 401


def test_overview_dead_equals_the_listing_count(desk: Desk) -> None:
    desk.dead("a")
    desk.dead("b")
    desk.ok("POST", "/api/v1/scans", desk.source, {"name": "waiting", "version": "1"})
    _mallory_dead(desk, "c")
    view = desk.ok("GET", "/api/v1/overview", desk.alice)
    assert [card["endpoint"] for card in view["endpoints"]] == ["npm", "pypi"]
    pypi = view["endpoints"][1]
    assert pypi["counts"]["dead"] == desk.listing()["count"] == 2
    assert pypi["counts"]["queued"] == 1 and pypi["oldest_queued_age_seconds"] is not None
    assert view["totals"]["dead"] == 2 and view["totals"]["queued"] == 1


def test_redrive_by_ids_requeues_with_history_kept_and_audits(desk: Desk) -> None:
    scan_id = desk.dead("flaky")
    other = _mallory_dead(desk, "theirs")
    alive = desk.ok("POST", "/api/v1/scans", desk.source, {"name": "alive", "version": "1"})
    body = {"scan_ids": [scan_id, other, alive["scan_id"], 999_999]}
    done = desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, body)
    assert done["redriven"] == 1
    assert done["skipped"] == [
        {"scan_id": other, "reason": "not_found"},
        {"scan_id": alive["scan_id"], "reason": "not_dead_lettered"},
        {"scan_id": 999_999, "reason": "not_found"},
    ]
    assert desk.listing()["count"] == 0
    assert desk.ok("GET", "/api/v1/overview", desk.alice)["totals"]["dead"] == 0
    # Leased again with a fresh budget, and finished: both attempts stay in the history.
    jobs = desk.ok("POST", "/api/v1/jobs?batch=5", desk.worker)
    job = next(j for j in jobs if j["scan_id"] == scan_id)
    assert job["attempt"] == 1
    result = {"outcome": "finished", "attempt": 1, "assignment_id": job["assignment_id"]}
    desk.ok("POST", f"/api/v1/jobs/{scan_id}/result", desk.worker, result)
    scan = desk.ok("GET", f"/api/v1/scans/{scan_id}", desk.alice)
    assert scan["status"] == "FINISHED"
    assert [(a["seq"], a["outcome"]) for a in scan["attempts"]] == [(1, "failed"), (2, "finished")]
    [entry] = desk.redrives(desk.alice)
    assert entry["action"] == "redrive" and entry["count"] == 1 and entry["origin"] == "api"
    assert entry["scan_ids"] == body["scan_ids"] and entry["filter"] is None
    assert desk.redrives(desk.mallory) == []
    # Its totals moved from dead to finished, as the metrics reconciliation reads them.
    assert desk.store.listings.snapshot().outcomes["dead_lettered"] == 1  # mallory's


def test_filter_redrive_needs_the_current_count(desk: Desk) -> None:
    a, b = desk.dead("left-pad"), desk.dead("leftpad")
    keep = desk.dead("other")
    body = {"filter": {"q": "left"}, "confirm": 3}
    refused = desk.call("POST", "/api/v1/dead-letters/redrive", desk.alice, body)
    assert refused.status_code == 409 and refused.json()["error"] == "count_changed"
    assert desk.listing()["count"] == 3
    assert desk.redrives(desk.alice) == []
    done = desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, {**body, "confirm": 2})
    assert done == {"redriven": 2, "skipped": [], "audit_id": done["audit_id"]}
    assert desk.ids() == [keep]
    for scan_id in (a, b):
        scan = desk.ok("GET", f"/api/v1/scans/{scan_id}", desk.alice)
        assert scan["status"] == "QUEUED" and scan["dead_lettered_at"] is None
    [entry] = desk.redrives(desk.alice)
    assert entry["filter"]["q"] == "left" and entry["count"] == 2


def test_a_revoked_endpoints_dead_letters_are_listed_but_not_redriven(desk: Desk) -> None:
    queued = desk.ok("POST", "/api/v1/scans", desk.source, {"name": "held", "version": "1"})
    desk.ok("POST", "/api/v1/endpoints/pypi/revoke", desk.alice)
    page = desk.listing()
    assert [s["scan_id"] for s in page["scans"]] == [queued["scan_id"]]
    assert page["scans"][0]["fail_reason"] == "endpoint_revoked"
    assert page["scans"][0]["final_attempt"]["seq"] is None
    # A filter redrive confirms what it will requeue: the revoked endpoint's are not counted.
    body = {"filter": {"reason": "endpoint_revoked"}, "confirm": 1}
    refused = desk.call("POST", "/api/v1/dead-letters/redrive", desk.alice, body)
    assert refused.status_code == 409 and refused.json()["error"] == "count_changed"
    assert "matches 0 dead letters to redrive" in refused.json()["detail"]
    by_id = {"scan_ids": [queued["scan_id"]]}
    done = desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, by_id)
    assert done["redriven"] == 0
    assert done["skipped"] == [{"scan_id": queued["scan_id"], "reason": "endpoint_revoked"}]


def test_a_filter_redrive_confirms_exactly_what_it_requeues(desk: Desk) -> None:
    desk.dead("redrivable")
    held = {"endpoint": "npm", "name": "held", "version": "1"}
    stays = desk.ok("POST", "/api/v1/scans", desk.alice, held)["scan_id"]
    desk.ok("POST", "/api/v1/endpoints/npm/revoke", desk.alice)
    assert desk.listing()["count"] == 2  # both are dead letters, and both are listed
    owner = desk.store.authentication.authenticate(desk.alice)
    assert desk.store.dead_letters.redrivable(owner.owner_id, DeadLetterFilter()) == 1
    done = desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, {"filter": {}, "confirm": 1})
    assert done["redriven"] == 1 and done["skipped"] == []
    assert desk.ids() == [stays]  # the revoked endpoint's dead letter stays where it was


def test_a_resubmitted_key_is_not_requeued_twice(desk: Desk) -> None:
    scan_id = desk.dead("dup")
    again = desk.ok("POST", "/api/v1/scans", desk.source, {"name": "dup", "version": "1"})
    assert again["scan_id"] != scan_id
    done = desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, {"scan_ids": [scan_id]})
    assert done["skipped"] == [{"scan_id": scan_id, "reason": "live_duplicate"}]


def test_large_redrives_run_in_chunks(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redrive_module, "CHUNK", 2)
    ids = [desk.dead(f"bulk-{i}") for i in range(5)]
    owner_id = desk.store.authentication.authenticate(desk.alice)
    assert owner_id is not None and owner_id.owner_id is not None
    seen: list[tuple[int, int]] = []
    done = desk.store.dead_letters.redrive_ids(
        owner_id.owner_id, ids, origin="cli", progress=lambda n, total: seen.append((n, total))
    )
    assert done.redriven == 5 and seen == [(2, 5), (4, 5), (5, 5)]
    [entry] = desk.redrives(desk.alice)
    assert entry["count"] == 5


def test_bad_redrive_bodies_are_422(desk: Desk) -> None:
    for body in [
        {},
        {"scan_ids": []},
        {"scan_ids": list(range(1, 1002))},
        {"scan_ids": [1], "filter": {}, "confirm": 0},
        {"filter": {"q": "x"}},
        {"filter": {"since": "2026-01-01T00:00:00"}, "confirm": 0},
        {"filter": {"reason": "bored"}, "confirm": 0},
    ]:
        response = desk.call("POST", "/api/v1/dead-letters/redrive", desk.alice, body)
        assert response.status_code == 422, body
        assert response.json()["error"] and response.json()["detail"], body

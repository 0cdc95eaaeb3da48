"""The rest of a dragonfly deployment against a real `mainframe serve` on SQLite and
PostgreSQL: what the loader and the bot send (headers, bodies, query strings, as
docs/dragonfly.md and the clients' source describe them) with a fake PyPI and a fake reporter
on loopback, and a worker's lease and result in between, through the routes it calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mainframe.settings import Settings
from mainframe.store import open_store
from mainframe.store.accounts.owners import OPERATOR
from tests.fakepypi import FakeServices, fake_services
from tests.polling import wait_for
from tests.serverproc import ServerProcess


@dataclass
class Deployment:
    server: ServerProcess
    pypi: FakeServices
    reporter: FakeServices
    tokens: dict[str, str]

    def http(self, who: str = "loader") -> httpx.Client:
        """A client that sends a source's Access service token on every request, as the
        loader (httpx) and the bot (aiohttp, JSON content type on every request) do."""
        headers = {"CF-Access-Client-Id": who, "CF-Access-Client-Secret": self.tokens[who]}
        if who == "bot":
            headers["Content-Type"] = "application/json"
        return httpx.Client(base_url=f"{self.server.url}/dragonfly", headers=headers, timeout=15)

    def worker(self, name: str = "w1") -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[name]}"}
        return httpx.Client(base_url=f"{self.server.url}/dragonfly", headers=headers, timeout=15)

    def lookup(self, **params: Any) -> list[dict[str, Any]]:
        with self.http("bot") as bot:
            reply = bot.get("/package", params=params)
        assert reply.status_code == 200, reply.text
        assert reply.headers["content-type"] == "application/json"
        found: list[dict[str, Any]] = reply.json()
        return found


async def _provision(database_url: str) -> dict[str, str]:
    """Endpoint `pypi` with sources `loader` and `bot` and worker `w1`; endpoint `other` with
    source `elsewhere`."""
    store = open_store(Settings(database_url=database_url))
    try:
        tokens = {"owner": await store.owners.create_owner("ops")}
        owner = await store.owners.owner_id("ops")
        for endpoint in ("pypi", "other"):
            await store.owners.create_endpoint(owner, endpoint, open_intake=False, origin="cli")
        credentials = (
            ("pypi", "loader", "source"),
            ("pypi", "bot", "source"),
            ("pypi", "w1", "worker"),
            ("pypi", "w2", "worker"),
            ("other", "elsewhere", "source"),
        )
        for endpoint, name, role in credentials:
            made = await store.owners.create_token(
                OPERATOR, endpoint, role=role, principal=name, origin="cli"
            )
            tokens[name] = made[1]
        return tokens
    finally:
        await store.close()


@contextmanager
def deployed(database_url: str, tmp_path: Path, **extra: str) -> Iterator[Deployment]:
    """A server with a fake PyPI and a fake reporter, and no unhandled error in its log."""
    tokens = asyncio.run(_provision(database_url))
    with fake_services() as pypi, fake_services() as reporter:
        env = {
            "MAINFRAME_DRAGONFLY_PYPI_URL": pypi.url,
            "MAINFRAME_DRAGONFLY_REPORTER_URL": reporter.url,
            "MAINFRAME_DRAGONFLY_UPSTREAM_TIMEOUT_SECONDS": "2",
            **extra,
        }
        with ServerProcess(database_url, tmp_path, **env) as server:
            yield Deployment(server, pypi, reporter, tokens)
            events = server.log_events()
    assert all(event["event"] != "unhandled_error" for event in events)


@pytest.fixture
def deployment(database_url: str, tmp_path: Path) -> Iterator[Deployment]:
    with deployed(database_url, tmp_path) as running:
        yield running


def _batch(deployment: Deployment, pairs: list[tuple[str, str]]) -> httpx.Response:
    with deployment.http("loader") as loader:
        return loader.post("/batch/package", json=[{"name": n, "version": v} for n, v in pairs])


def _finish(deployment: Deployment, name: str, score: int = 9) -> dict[str, Any]:
    """Lease the scan of `name` as worker w1 and report it finished."""
    with deployment.worker() as worker:
        jobs = worker.post("/jobs", params={"batch": 1}).json()
        assert [job["name"] for job in jobs] == [name]
        body = {"name": name, "version": jobs[0]["version"], "score": score,
                "inspector_url": f"https://inspector.example/{name}",
                "rules_matched": ["exec_base64"], "commit": "abc123"}  # fmt: skip
        reply = worker.put("/package", json=body)
    assert reply.status_code == 200, reply.text
    job: dict[str, Any] = jobs[0]
    return job


def test_the_loaders_minutes_queue_each_release_once(deployment: Deployment) -> None:
    pypi = deployment.pypi
    urls = pypi.release("left-pad", "1.0")
    pypi.release("requests", "2.0")
    pypi.release("Flask_Login", "0.6", spelled="Flask-Login")
    first = [("left-pad", "1.0"), ("requests", "2.0"), ("left-pad", "1.0"), ("ghost", "9")]
    reply = _batch(deployment, first)
    assert (reply.status_code, reply.content) == (200, b"null")
    assert reply.headers["content-type"] == "application/json"
    [scan] = deployment.lookup(name="left-pad")
    assert (scan["status"], scan["download_urls"], scan["queued_by"]) == ("queued", urls, "loader")
    assert deployment.lookup(name="ghost") == []  # PyPI knows no such release: skipped

    # The next minute overlaps: a known pair is skipped, a new one queued under PyPI's name.
    _finish(deployment, "left-pad")
    lookups = len(pypi.lookups)
    assert _batch(deployment, [("left-pad", "1.0"), ("Flask_Login", "0.6")]).status_code == 200
    assert len(pypi.lookups) == lookups + 1  # only the new pair was looked up
    assert [s["name"] for s in deployment.lookup(name="Flask-Login")] == ["Flask-Login"]
    assert _batch(deployment, [("Flask_Login", "0.6")]).status_code == 200
    assert len(deployment.lookup(name="Flask-Login")) == 1
    [finished] = deployment.lookup(name="left-pad")
    assert finished["status"] == "finished"  # a finished release sent again stays one scan

    # PyPI failing fails the whole batch, and queues none of it.
    pypi.release("numpy", "2.1")
    pypi.pypi_down = True
    reply = _batch(deployment, [("numpy", "2.1")])
    assert reply.status_code == 503 and reply.json()["error"] == "pypi_unavailable"
    assert "retry-after" in reply.headers
    pypi.pypi_down = False
    assert deployment.lookup(name="numpy") == []
    for bad in ([{"name": "x"}], {"name": "x", "version": "1"}, [{"name": "", "version": "1"}]):
        with deployment.http("loader") as loader:
            refused = loader.post("/batch/package", json=bad)
        assert refused.status_code == 422 and refused.json()["detail"][0]["field"].startswith(
            "body"
        )
    with deployment.http("loader") as loader:
        assert loader.post("/batch/package", content=b"[{").status_code == 422
        assert loader.post("/batch/package", json=[]).status_code == 200
    assert deployment.lookup(name="numpy") == []


def test_the_bots_lookups_follow_a_scan_through_lease_and_result(
    deployment: Deployment,
) -> None:
    deployment.pypi.release("left-pad", "1.0")
    deployment.pypi.release("left-pad", "1.1")
    before = int(time.time())
    assert _batch(deployment, [("left-pad", "1.0"), ("left-pad", "1.1")]).status_code == 200
    with deployment.http("bot") as bot:
        refusals = (
            ({}, 400),
            ({"version": "1.0", "since": 1, "name": "x"}, 400),
            ({"since": "soon"}, 422),
            ({"name": "x", "size": 0, "page": 1}, 422),
        )
        for params, status in refusals:
            assert bot.get("/package", params=params).status_code == status, params
    [newest, oldest] = deployment.lookup(name="left-pad")
    assert [newest["version"], oldest["version"]] == ["1.1", "1.0"]  # newest queued first
    assert set(newest) == {
        "scan_id", "name", "version", "status", "score", "inspector_url", "rules",
        "download_urls", "queued_at", "queued_by", "reported_at", "reported_by",
        "report_summary", "pending_at", "pending_by", "attempt_count", "dead_lettered_at",
        "finished_at", "finished_by", "commit_hash",
    }  # fmt: skip
    assert before - 1 <= newest["queued_at"] <= time.time() + 1
    assert _status(deployment, queued=2)["total_backlog"] == 2

    job = _finish(deployment, "left-pad")  # the oldest, 1.0
    [scan] = deployment.lookup(name="left-pad", version=job["version"])
    assert scan["status"] == "finished" and scan["score"] == 9
    assert scan["rules"] == ["exec_base64"] and scan["commit_hash"] == "abc123"
    assert (scan["pending_by"], scan["finished_by"]) == ("w1", "w1")
    assert scan["inspector_url"] == "https://inspector.example/left-pad"
    status = _status(deployment, queued=1)
    assert status["in_progress"] == 0 and status["oldest_queued_at"] >= before - 1

    with deployment.worker() as worker:
        assert len(worker.post("/jobs").json()) == 1
    _status(deployment, queued=0, in_progress=1)
    # The scan loop's `since`: only what finished since, not what is queued or leased.
    assert [s["version"] for s in deployment.lookup(since=before)] == ["1.0"]
    assert deployment.lookup(since=int(time.time()) + 5) == []
    with deployment.http("bot") as bot:
        page = bot.get("/package", params={"name": "left-pad", "page": 1, "size": 1}).json()
    assert (page["total"], page["pages"], len(page["items"])) == (2, 2, 1)
    with deployment.http("elsewhere") as other:  # another endpoint's source sees none of it
        assert other.get("/package", params={"name": "left-pad"}).json() == []


def test_the_bots_queue_command(deployment: Deployment) -> None:
    deployment.pypi.release("left-pad", "1.0")
    with deployment.http("bot") as bot:
        missing = bot.post("/package", json={"name": "ghost", "version": "1"})
        assert missing.status_code == 404  # "not on PyPI"
        queued = bot.post("/package", json={"name": "left-pad", "version": "1.0"})
        assert queued.status_code == 200 and queued.headers["content-type"] == "application/json"
        again = bot.post("/package", json={"name": "left-pad", "version": "1.0"})
        assert (again.status_code, again.json()["error"]) == (409, "already_queued")
        assert bot.post("/package", json={"name": "left-pad"}).status_code == 422
    # The bot's 409 branch looks the package up by name and version.
    [scan] = deployment.lookup(name="left-pad", version="1.0")
    assert scan["scan_id"] == queued.json()["id"] and scan["queued_by"] == "bot"
    assert scan["download_urls"] == ["https://files.example/left-pad-1.0.tar.gz"]


def _status(deployment: Deployment, **expected: int) -> dict[str, Any]:
    """The queue status once it shows `expected` (it is counted again every few seconds)."""

    def current() -> dict[str, Any] | None:
        with deployment.http("bot") as bot:
            reply = bot.get("/queue-status")
        assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
        found: dict[str, Any] = reply.json()
        return found if all(found[k] == v for k, v in expected.items()) else None

    return wait_for(current, timeout=10, what=f"queue status {expected}")


def test_a_report_reaches_the_reporter_once(deployment: Deployment) -> None:
    pypi = deployment.pypi
    pypi.release("evil", "1.0")
    pypi.release("evil", "2.0")
    pypi.release("plain", "1.0")
    queued = _batch(deployment, [("evil", "1.0"), ("evil", "2.0"), ("plain", "1.0")])
    assert queued.status_code == 200

    def report(name: str, version: str, inspector_url: str | None = None) -> httpx.Response:
        body = {"name": name, "version": version, "inspector_url": inspector_url,
                "additional_information": "base64 exec in setup.py", "recipient": None,
                "use_email": False}  # fmt: skip
        with deployment.http("bot") as bot:
            return bot.post("/report", json=body)

    assert report("unknown", "1.0").status_code == 404  # no scan of the name
    assert report("evil", "3.0").status_code == 404  # no scan of the version
    assert report("evil", "1.0").status_code == 400  # no inspector URL anywhere
    with deployment.http("bot") as bot:  # the inspector_url key must be sent
        missing = bot.post("/report", json={"name": "evil", "version": "1.0",
                                            "additional_information": "x"})  # fmt: skip
    assert missing.status_code == 422
    assert deployment.reporter.reports == []

    _finish(deployment, "evil")  # 1.0, with an inspector URL
    reply = report("evil", "1.0")
    assert (reply.status_code, reply.content) == (200, b"null")
    [(name, sent)] = deployment.reporter.reports
    assert name == "evil"
    assert sent == {"kind": "is_malware", "summary": "base64 exec in setup.py",
                    "inspector_url": "https://inspector.example/evil",
                    "extra": {"yara_rules": ["exec_base64"]}}  # fmt: skip
    [shown] = deployment.lookup(name="evil", version="1.0")
    assert shown["reported_by"] == "bot" and shown["report_summary"] == "base64 exec in setup.py"
    assert shown["reported_at"] >= shown["queued_at"]
    assert report("evil", "2.0", "https://inspector.example/x").status_code == 409  # reported
    with deployment.http("bot") as bot:
        listed = bot.get("/reported-packages").json()
    assert (listed["total"], listed["page"], listed["size"]) == (1, 1, 50)
    assert [item["name"] for item in listed["items"]] == ["evil"]

    deployment.reporter.stop()  # the reporter cannot be reached: nothing is recorded
    down = report("plain", "1.0", "https://inspector.example/plain")
    assert down.status_code == 503 and down.json()["error"] == "reporter_unavailable"
    assert deployment.lookup(name="plain")[0]["reported_at"] is None


def test_the_alert_threshold_and_suppressions(deployment: Deployment) -> None:
    with deployment.http("bot") as bot:
        assert bot.get("/alerting/configuration").json()["production_score_threshold"] == 8
        changed = bot.put("/alerting/configuration", json={"production_score_threshold": 11})
        assert changed.status_code == 200 and changed.json()["updated_by"] == "bot"
        assert bot.get("/alerting/configuration").json()["production_score_threshold"] == 11
        refused = bot.put("/alerting/configuration", json={"production_score_threshold": -1})
        assert refused.status_code == 422

        made = bot.post("/packages/Left_Pad/versions/1.0/suppressions", json={"rules": ["a"]})
        assert made.status_code == 201, made.text
        one = made.json()
        assert (one["package_name"], one["rules"], one["created_by"]) == ("left-pad", ["a"], "bot")
        every = bot.post("/packages/left-pad/versions/1.0/suppressions", json={}).json()
        assert every["rules"] is None  # no rules: every rule
        listed = bot.get("/packages/left.pad/suppressions").json()
        ids = [one["suppression_id"], every["suppression_id"]]
        assert [s["suppression_id"] for s in listed] == ids
        path = f"/packages/left-pad/versions/1.0/suppressions/{one['suppression_id']}"
        patched = bot.patch(path, json={"rules": ["a", "b"]}).json()
        assert patched["rules"] == ["a", "b"] and bot.get(path).json() == patched
        assert bot.patch(path, json={"rules": ["a", "a"]}).status_code == 422
        assert bot.delete(path).json() == {"deleted": 1}
        assert bot.get(path).status_code == 404
        assert bot.get("/packages/left-pad/versions/1.0/suppressions/not-a-uuid").status_code == 404
        gone = bot.delete("/packages/left-pad/versions/1.0/suppressions").json()
        assert gone == {"deleted": 1}
    with deployment.http("elsewhere") as other:
        assert other.get("/alerting/configuration").json()["production_score_threshold"] == 8


def test_only_a_source_of_the_endpoint_gets_in(deployment: Deployment) -> None:
    base = f"{deployment.server.url}/dragonfly"
    tokens = deployment.tokens
    with httpx.Client(base_url=base, timeout=15) as http:
        assert http.get("/queue-status").status_code == 401
        wrong = {"CF-Access-Client-Id": "loader", "CF-Access-Client-Secret": tokens["bot"]}
        assert http.get("/queue-status", headers=wrong).status_code == 401
        bad = {"CF-Access-Client-Id": "loader", "CF-Access-Client-Secret": "mfs_nope"}
        assert http.get("/queue-status", headers=bad).status_code == 401
        worker = {"CF-Access-Client-Id": "w1", "CF-Access-Client-Secret": tokens["w1"]}
        refused = http.post("/batch/package", headers=worker, json=[])
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
        owner = {"Authorization": f"Bearer {tokens['owner']}"}
        assert http.post("/package", headers=owner, json={}).status_code == 403
        source = {"Authorization": f"Bearer {tokens['loader']}"}
        assert http.get("/queue-status", headers=source).status_code == 200


def _poll(deployment: Deployment, worker: str) -> dict[str, Any]:
    with deployment.worker(worker) as http:
        [job] = http.post("/jobs").json()
    found: dict[str, Any] = job
    return found


def _report(deployment: Deployment, worker: str, body: dict[str, Any]) -> httpx.Response:
    """A result as the unmodified Rust worker sends it: no attempt, no assignment id."""
    with deployment.worker(worker) as http:
        return http.put("/package", json=body)


@pytest.mark.parametrize("setting", ["lease_holder", "rollout"])
def test_an_unmodified_workers_retry(database_url: str, tmp_path: Path, setting: str) -> None:
    extra = {
        "MAINFRAME_DRAGONFLY_LEGACY_RESULTS": setting,
        "MAINFRAME_RETRY_BASE_SECONDS": "0",
        "MAINFRAME_RETRY_ELSEWHERE_SECONDS": "0",
    }
    with deployed(database_url, tmp_path, **extra) as deployment:
        deployment.pypi.release("flaky", "1.0")
        assert _batch(deployment, [("flaky", "1.0")]).status_code == 200
        failure = {"name": "flaky", "version": "1.0", "reason": "download timed out"}
        success = {"name": "flaky", "version": "1.0", "score": 1, "inspector_url": None,
                   "rules_matched": [], "commit": "abc"}  # fmt: skip
        assert _poll(deployment, "w1")["attempt"] == 1
        assert _report(deployment, "w1", failure).status_code == 200  # queued again

        # w1 takes the retry itself: a result echoing nothing could be its first attempt's,
        # late, so it is refused whatever the setting.
        retry = _poll(deployment, "w1")
        assert retry["attempt"] == 2
        refused = _report(deployment, "w1", success)
        assert (refused.status_code, refused.json()["error"]) == (409, "stale_assignment")
        assert _report(deployment, "w1", failure).status_code == 409

        # w1 fails attempt 2 echoing its pair (as a newer worker would); then w2, which never
        # held an attempt of the scan, takes attempt 3 and reports without the pair.
        pair = {"attempt": 2, "assignment_id": retry["assignment_id"]}
        assert _report(deployment, "w1", failure | pair).status_code == 200
        assert _poll(deployment, "w2")["attempt"] == 3
        answer = _report(deployment, "w2", success)
        if setting == "lease_holder":
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "FINISHED"
            [scan] = deployment.lookup(name="flaky")
            assert (scan["status"], scan["finished_by"]) == ("finished", "w2")
        else:
            assert (answer.status_code, answer.json()["error"]) == (409, "stale_assignment")
            assert deployment.lookup(name="flaky")[0]["status"] == "pending"

"""How far a worker's two most frequent requests travel through the server's own code, on
each database: the modules a job poll and a result with complete-and-fetch run, from their
route to their SQL and back, and the statements they send. ARCHITECTURE.md walks these paths
file by file; this test keeps the walk short and the statements few.

A module counts when one of its functions runs for the route: from the hot route's entry
(`api/hot.py::HotRoute.serve`, which reads the token, the parameters and the body, calls
the route's function and serialises its reply) to the route's SQL and back. Not counted: the
functional core (`lifecycle/`, `contract/`, the injected clock), which a reader reads on its
own terms; what the committed transaction's events set off (`effects.py` and the
subscribers it calls), which is the same for every write and walked in its own section; and
the statements a step runs from a module of statements alone (`store/work/closing.py`, the
history, cause and totals writes every close shares), read as SQL like the statements files."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from mainframe.api import jobs
from mainframe.api.app import HOT
from mainframe.api.hot import HotRoute
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from tests.blocking import Blocking
from tests.integration.conftest import Api, issue

# At most, on either database: a poll (the one statement of the usual case) and a poll that
# also reaps lapsed leases; a result, a result with its next jobs, and a replayed result.
POLL_MODULES = 7
REAPING_POLL_MODULES = 7
RESULT_MODULES = 7
RESULT_NEXT_MODULES = 8
REPLAY_MODULES = 8
CORE = ("mainframe.lifecycle", "mainframe.contract", "mainframe.clock")
SUBSCRIBERS = "mainframe.effects"
STATEMENT_METHODS = frozenset({"rows", "run", "many"})


@dataclass
class Trace:
    """What one request ran inside its route."""

    modules: list[str] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)
    # Frames already seen: a coroutine's frame is "called" again each time it resumes.
    frames: list[FrameType] = field(default_factory=list)

    def count(self, name: str) -> int:
        return self.statements.count(name)


def _calls(route: Callable[..., Any]) -> frozenset[CodeType]:
    """The code of the hot route's entry, which serves one request of `route` at a time."""
    assert any(hot.declared is route for hot in HOT), f"{route.__name__} is not a hot route"
    return frozenset({HotRoute.serve.__code__, route.__code__})


def _inside(frame: FrameType | None, route: frozenset[CodeType]) -> bool:
    """Whether `frame` runs on behalf of the route, and not for the subscribers."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == SUBSCRIBERS:
            return False
        if frame.f_code in route:
            return True
        frame = frame.f_back
    return False


def _profiler(trace: Trace, route: frozenset[CodeType]) -> Callable[[FrameType, str, Any], None]:
    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("mainframe") or not _inside(frame, route):
            return
        if any(seen is frame for seen in trace.frames):
            return
        trace.frames.append(frame)
        if frame.f_code.co_name in STATEMENT_METHODS and "sql" in frame.f_locals:
            trace.statements.append(frame.f_locals["sql"].name)
        if not module.startswith(CORE) and module not in trace.modules:
            trace.modules.append(module)

    return profile


@dataclass
class Worker:
    client: TestClient
    token: str
    source: str

    def traced(self, route: Callable[..., Any], path: str, body: Any = None) -> tuple[Any, Trace]:
        """POST `path`, tracing the call of the route function `route`."""
        trace = Trace()
        profile = _profiler(trace, _calls(route))
        self.client.portal.call(lambda: sys.setprofile(profile))  # type: ignore[union-attr]
        try:
            response = self.client.post(path, json=body, headers=self.auth)
        finally:
            self.client.portal.call(lambda: sys.setprofile(None))  # type: ignore[union-attr]
        return response, trace

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def submit(self, count: int) -> None:
        for n in range(count):
            body = {"name": f"pkg{n}", "version": "1"}
            headers = {"Authorization": f"Bearer {self.source}"}
            assert self.client.post("/api/v1/scans", json=body, headers=headers).status_code == 201


@pytest.fixture
def worker(api: Api) -> Worker:
    """The worker of alice's `pypi` with four scans queued."""
    found = Worker(api.client, api.worker, api.source)
    found.submit(4)
    return found


def _result(job: dict[str, Any], outcome: str = "finished") -> dict[str, Any]:
    return {"outcome": outcome, "attempt": job["attempt"], "assignment_id": job["assignment_id"]}


def _lapse_every_lease(database_url: str) -> None:
    engine = create_store_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE scans SET lease_expires_at = 0 WHERE status = 'PENDING'"))
    finally:
        engine.dispose()


def test_a_poll_runs_one_statement_in_few_modules(worker: Worker) -> None:
    worker.client.post("/api/v1/jobs", headers=worker.auth)  # the first poll of a token reaps
    response, trace = worker.traced(jobs.lease_jobs, "/api/v1/jobs?batch=2")
    assert response.status_code == 200 and len(response.json()) == 2
    assert trace.statements == ["lease"]

    assert len(trace.modules) <= POLL_MODULES, " ".join(trace.modules)


def test_a_poll_that_reaps_stays_short(worker: Worker, database_url: str) -> None:
    leased = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    _lapse_every_lease(database_url)
    store = worker.client.app.state.runtime.store  # type: ignore[attr-defined]
    other = issue(Blocking(store, worker.client.portal), "pypi", "worker", "w2")
    worker.token = other  # a token this process has not seen: its poll looks for lapses
    response, trace = worker.traced(jobs.lease_jobs, "/api/v1/jobs?batch=4")
    assert response.status_code == 200
    assert leased[0]["scan_id"] in [job["scan_id"] for job in response.json()]
    assert trace.count("authenticate") == 1

    assert len(trace.modules) <= REAPING_POLL_MODULES, " ".join(trace.modules)


def test_a_result_is_one_trip_through_few_modules(worker: Worker) -> None:
    [job] = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    path = f"/api/v1/jobs/{job['scan_id']}/result"
    response, trace = worker.traced(jobs.report_result, path, _result(job))
    assert response.status_code == 200 and response.json()["status"] == "FINISHED"
    assert trace.count("authenticate") <= 1 and trace.count("replayed_result") == 0

    assert len(trace.modules) <= RESULT_MODULES, " ".join(trace.modules)


def test_a_result_with_next_jobs_is_one_trip_through_few_modules(worker: Worker) -> None:
    [job] = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    path = f"/api/v1/jobs/{job['scan_id']}/result?next=1"
    response, trace = worker.traced(jobs.report_result, path, _result(job))
    assert response.status_code == 200 and len(response.json()["next"]) == 1
    assert trace.count("authenticate") <= 1 and trace.count("replayed_result") == 0

    assert len(trace.modules) <= RESULT_NEXT_MODULES, " ".join(trace.modules)


def test_a_replayed_result_looks_its_answer_up_once(worker: Worker) -> None:
    [job] = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    path = f"/api/v1/jobs/{job['scan_id']}/result?next=1"
    first = worker.client.post(path, json=_result(job), headers=worker.auth).json()
    response, trace = worker.traced(jobs.report_result, path, _result(job))
    assert response.status_code == 200 and response.json() == first
    assert trace.count("authenticate") <= 1 and trace.count("replayed_result") == 1

    assert len(trace.modules) <= REPLAY_MODULES, " ".join(trace.modules)


def test_a_refused_result_authenticates_the_worker_once(worker: Worker) -> None:
    [job] = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    worker.client.post(
        f"/api/v1/jobs/{job['scan_id']}/result", json=_result(job), headers=worker.auth
    )
    stale = _result(job) | {"assignment_id": "not-this-one"}
    path = f"/api/v1/jobs/{job['scan_id']}/result?next=1"
    response, trace = worker.traced(jobs.report_result, path, stale)
    assert response.status_code == 409

    assert trace.count("authenticate") == 1 and trace.count("replayed_result") == 1

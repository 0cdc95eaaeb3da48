"""How far a worker's requests travel through the server's own code, on each database: every
module of `mainframe` a job poll or a result runs, from the ASGI edge to the effects of its
committed transaction, and the statements it sends. ARCHITECTURE.md walks these paths module by
module; this test holds each path to an exact figure per database, so a path that grows or
shrinks fails here until the figure and the walk say so.

A module counts when one of its functions runs while the request is served, anywhere below the
app's `__call__` for that request: the edge and its middleware, the route, the pure core
(`lifecycle/`, `contract/`, the clock), the store, and the effects its committed events set off
(`effects.py` and what it calls). A statement the request sends counts a module that names it,
when none of the modules that do is already on the path (one that only named statements for
others would be read as part of the path). Nothing else is left out. Work on the same event
loop in tasks of its own (the hook dispatcher's deliveries, the sweeper) is not the request's,
and not counted."""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType, FrameType, ModuleType
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from mainframe.store.engine.database import Sql
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from tests.blocking import Blocking
from tests.integration.conftest import Api, issue

# The modules each path runs, on each database: exact, so a path that changes fails until its
# figure is changed with it (the failure lists the path's modules). The aims of the code's
# layout: a poll in at most 10 modules, a result with its next jobs in at most 12, a refused
# result in at most 12.
# On PostgreSQL a poll and a finished result go through the coalescer (store/work/coalesce.py),
# which sends those that meet as one statement, and a result binds its next leases' terms as
# leasing.py writes them, next leases asked for or not.
MODULES = {
    "poll": {"sqlite": 10, "postgresql": 11},
    "reaping poll": {"sqlite": 15, "postgresql": 15},
    "result": {"sqlite": 11, "postgresql": 13},
    "result?next=1": {"sqlite": 12, "postgresql": 13},
    "replayed result": {"sqlite": 10, "postgresql": 12},
    "refused result": {"sqlite": 12, "postgresql": 14},
}
PROJECT = "mainframe."
STATEMENT_METHODS = frozenset({"rows", "run", "many"})  # `Tx`'s, each given a `sql`


@dataclass
class Trace:
    """What one request ran, from the app's `__call__` to the effects after commit."""

    modules: list[str] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)
    # Frames already seen: a coroutine's frame is "called" again each time it resumes. They
    # are kept, so that no id is reused by another frame while the request runs.
    frames: dict[int, FrameType] = field(default_factory=dict, repr=False)

    def count(self, name: str) -> int:
        return self.statements.count(name)

    def ran(self, module: str) -> None:
        if module not in self.modules:
            self.modules.append(module)


@functools.cache
def _homes() -> dict[int, list[str]]:
    """The modules that name each statement, by the statement's id: where it is assigned at
    the top level (`NAME = statement(...)`), not the modules that import it. Read once, before
    any traced request: a poll reads lapses again a second after its last look."""
    found: dict[int, list[str]] = {}
    for name, module in list(sys.modules.items()):
        if name.startswith(PROJECT) and _has_statements(module):
            for assigned in _top_level_names(module):
                value = getattr(module, assigned, None)
                if isinstance(value, Sql):
                    found.setdefault(id(value), []).append(name)
    return found


def _has_statements(module: ModuleType) -> bool:
    return any(isinstance(value, Sql) for value in vars(module).values())


def _top_level_names(module: ModuleType) -> list[str]:
    tree = ast.parse(inspect.getsource(module))
    return [
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    ]


def _below(frame: FrameType | None, root: FrameType) -> bool:
    """Whether `frame` runs for the request whose edge frame is `root`: a coroutine's caller
    is the coroutine awaiting it, so every frame of the request's task leads back to it."""
    while frame is not None:
        if frame is root:
            return True
        frame = frame.f_back
    return False


def _profiler(
    trace: Trace, edge: CodeType, homes: dict[int, list[str]]
) -> Callable[[FrameType, str, Any], None]:
    root: list[FrameType] = []

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        if not root:
            if frame.f_code is edge and frame.f_locals["scope"]["type"] == "http":
                root.append(frame)  # the app's `__call__` for the traced request
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PROJECT) or id(frame) in trace.frames:
            return
        if not _below(frame, root[0]):
            return
        trace.frames[id(frame)] = frame
        trace.ran(module)
        if frame.f_code.co_name in STATEMENT_METHODS and isinstance(frame.f_locals.get("sql"), Sql):
            sql: Sql = frame.f_locals["sql"]
            trace.statements.append(sql.name)
            named = homes.get(id(sql), [f"(no home found for {sql.name})"])
            if not any(home in trace.modules for home in named):
                trace.ran(named[0])  # a statement named only where none of the path's code is

    return profile


@dataclass
class Worker:
    client: TestClient
    token: str
    source: str
    database: str

    def traced(self, path: str, body: Any = None) -> tuple[Any, Trace]:
        """POST `path`, tracing the app from its `__call__` for this request."""
        trace = Trace()
        edge = type(self.client.app).__call__.__code__
        profile = _profiler(trace, edge, _homes())
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

    def runs_as_many_modules_as_stated(self, path: str, trace: Trace) -> None:
        expected, found = MODULES[path][self.database], len(trace.modules)
        shown = "\n  ".join(trace.modules)
        print(f"\n{path} on {self.database}: {found} modules\n  {shown}")
        assert found == expected, (
            f"{path} on {self.database}: {found} modules, not {expected}:\n  {shown}"
        )


@pytest.fixture(autouse=True)
def production_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows a server reads in production (the drivers' own, in C), not the suite's strict
    ones, whose checks would add a module of their own to every path."""
    monkeypatch.setenv("MAINFRAME_STRICT_ROWS", "0")


@pytest.fixture
def worker(api: Api, database_url: str) -> Worker:
    """The worker of alice's `pypi` with four scans queued."""
    database = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    _homes()
    found = Worker(api.client, api.worker, api.source, database)
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


def test_a_poll_runs_one_statement(worker: Worker) -> None:
    worker.client.post("/api/v1/jobs", headers=worker.auth)  # the first poll of a token reaps
    response, trace = worker.traced("/api/v1/jobs?batch=2")
    assert response.status_code == 200 and len(response.json()) == 2
    assert trace.statements == ["lease"]

    worker.runs_as_many_modules_as_stated("poll", trace)


def test_a_poll_that_reaps_authenticates_once(worker: Worker, database_url: str) -> None:
    leased = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    _lapse_every_lease(database_url)
    store = worker.client.app.state.runtime.store  # type: ignore[attr-defined]
    other = issue(Blocking(store, worker.client.portal), "pypi", "worker", "w2")
    worker.token = other  # a token this process has not seen: its poll looks for lapses
    response, trace = worker.traced("/api/v1/jobs?batch=4")
    assert response.status_code == 200
    assert leased[0]["scan_id"] in [job["scan_id"] for job in response.json()]
    assert trace.count("authenticate") == 1

    worker.runs_as_many_modules_as_stated("reaping poll", trace)


def test_a_result_authenticates_at_most_once(worker: Worker) -> None:
    [job] = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    response, trace = worker.traced(f"/api/v1/jobs/{job['scan_id']}/result", _result(job))
    assert response.status_code == 200 and response.json()["status"] == "FINISHED"
    assert trace.count("authenticate") <= 1 and trace.count("replayed_result") == 0

    worker.runs_as_many_modules_as_stated("result", trace)


def test_a_result_with_next_jobs_authenticates_at_most_once(worker: Worker) -> None:
    [job] = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    path = f"/api/v1/jobs/{job['scan_id']}/result?next=1"
    response, trace = worker.traced(path, _result(job))
    assert response.status_code == 200 and len(response.json()["next"]) == 1
    assert trace.count("authenticate") <= 1 and trace.count("replayed_result") == 0

    worker.runs_as_many_modules_as_stated("result?next=1", trace)


def test_a_replayed_result_looks_its_answer_up_once(worker: Worker) -> None:
    [job] = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    path = f"/api/v1/jobs/{job['scan_id']}/result?next=1"
    first = worker.client.post(path, json=_result(job), headers=worker.auth).json()
    response, trace = worker.traced(path, _result(job))
    assert response.status_code == 200 and response.json() == first
    assert trace.count("authenticate") <= 1 and trace.count("replayed_result") == 1

    worker.runs_as_many_modules_as_stated("replayed result", trace)


def test_a_refused_result_authenticates_the_worker_once(worker: Worker) -> None:
    [job] = worker.client.post("/api/v1/jobs", headers=worker.auth).json()
    worker.client.post(
        f"/api/v1/jobs/{job['scan_id']}/result", json=_result(job), headers=worker.auth
    )
    stale = _result(job) | {"assignment_id": "not-this-one"}
    path = f"/api/v1/jobs/{job['scan_id']}/result?next=1"
    response, trace = worker.traced(path, stale)
    assert response.status_code == 409
    assert trace.count("authenticate") == 1 and trace.count("replayed_result") == 1

    worker.runs_as_many_modules_as_stated("refused result", trace)

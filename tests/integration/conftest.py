"""Store fixtures: a Store on each database with a fake clock and a recording publisher."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from mainframe.api.app import create_app
from mainframe.clock import FakeClock
from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.scans import Event
from mainframe.settings import Settings
from mainframe.store import Budget, Principal, Publish, ScanRecord, ScanSpec, Store, open_database
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.watch.database import create_watch_engine
from tests.blocking import Blocking, portal

JOB_TIMEOUT = 30.0
MAX_ATTEMPTS = 3


@dataclass
class Recorder:
    events: list[Event] = field(default_factory=list)

    def __call__(self, events: Sequence[Event]) -> None:
        self.events.extend(events)

    def of(self, kind: type) -> list[Event]:
        return [e for e in self.events if isinstance(e, kind)]


@dataclass
class World:
    store: Any  # a Blocking proxy of the Store (tests/blocking.py)
    clock: FakeClock
    published: Recorder
    owner: Principal
    source: Principal
    worker: Principal
    other_worker: Principal

    def submit(self, name: str = "pkg", version: str = "1.0", **kw: object) -> int:
        scan, _ = submit_scan(
            self.store,
            self.source,
            endpoint=None,
            queue=str(kw.get("queue", "default")),
            name=name,
            version=version,
            kind="scan",
            payload=None,
        )
        return scan.id


def submit_scan(
    store: Any,
    principal: Principal | None,
    *,
    endpoint: str | None,
    queue: str,
    name: str,
    version: str,
    kind: str,
    payload: str | None,
) -> tuple[ScanRecord, bool]:
    """One submission through the intake role, spelled with keywords for readable tests."""
    spec = ScanSpec(name, version, queue, kind, payload)
    return store.intake.submit(principal, endpoint=endpoint, spec=spec)


@pytest.fixture
def loop() -> Iterator[BlockingPortal]:
    """The event loop the store's coroutines run on, for one test."""
    with portal() as found:
        yield found


def blocking_store(
    database_url: str,
    loop: BlockingPortal,
    clock: FakeClock,
    *,
    budget: Budget | None = None,
    retry: RetryPolicy | None = None,
    publish: Publish | None = None,
    **kwargs: Any,
) -> Any:
    """A Store on `database_url` whose clock (the database's too) is `clock`, as a blocking
    proxy on `loop`."""
    db = open_database(database_url, clock=clock)
    if publish is not None:
        db.publish = publish
    store = Store.build(
        db,
        budget or Budget.of(job_timeout=JOB_TIMEOUT, max_attempts=MAX_ATTEMPTS),
        # Store tests see retries due at once unless they ask for a backoff (test_retry_wait).
        retry=retry or RetryPolicy(base=0),
        clock=clock,
        rng=random.Random(7),
        **kwargs,
    )
    return Blocking(store, loop)


def add_endpoint(store: Any, owner: str, name: str, *, open_intake: bool) -> None:
    """A new endpoint of `owner`, made as the CLI makes it."""
    owner_id = store.owners.owner_id(owner)
    store.owners.create_endpoint(owner_id, name, open_intake=open_intake, origin="cli")


def issue(store: Any, endpoint: str, role: str, principal: str) -> str:
    """The secret of a new credential of `endpoint`, issued as the CLI issues it."""
    found = store.owners.create_token(
        OPERATOR, endpoint, role=role, principal=principal, origin="cli"
    )
    return str(found[1])


def open_world(
    database_url: str, loop: BlockingPortal, clock: FakeClock | None = None, **store_kwargs: Any
) -> World:
    """Two owners' endpoints and a source and two workers of bob's `npm`, on a Store built
    with `store_kwargs` (e.g. a retention policy); close its store when done."""
    clock = clock or FakeClock()
    recorder = Recorder()
    store = blocking_store(database_url, loop, clock, publish=recorder, **store_kwargs)
    store.owners.create_owner("alice")
    add_endpoint(store, "alice", "pypi", open_intake=True)
    owner = store.authentication.authenticate(store.owners.create_owner("bob"))
    add_endpoint(store, "bob", "npm", open_intake=False)
    tokens = {
        "source": issue(store, "npm", "source", "feed"),
        "worker": issue(store, "npm", "worker", "w1"),
        "other": issue(store, "npm", "worker", "w2"),
    }
    found = {key: store.authentication.authenticate(secret) for key, secret in tokens.items()}
    assert owner is not None and all(found.values())
    return World(
        store,
        clock,
        recorder,
        owner,
        found["source"],
        found["worker"],  # type: ignore[arg-type]
        found["other"],
    )  # type: ignore[arg-type]


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on the test's database, to read its tables beside the store."""
    found = create_store_engine(database_url)
    yield found
    found.dispose()


@pytest.fixture
def world(database_url: str, loop: BlockingPortal) -> Iterator[World]:
    found = open_world(database_url, loop)
    yield found
    found.store.close()


# The HTTP contract, in process (fastapi.testclient), for test_api.py and its siblings.
@dataclass
class Api:
    client: TestClient
    owner: str
    other_owner: str
    source: str
    worker: str
    other_worker: str

    def post(self, path: str, token: str | None, body: Any = None, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.post(path, json=body, headers=headers, **kw)

    def get(self, path: str, token: str | None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.get(path, headers=headers)

    def submit(self, name: str = "pkg", **extra: Any) -> dict[str, Any]:
        response = self.post("/api/v1/scans", self.source, {"name": name, "version": "1", **extra})
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    def lease(self, token: str | None = None, batch: int = 1) -> list[dict[str, Any]]:
        response = self.post(f"/api/v1/jobs?batch={batch}", token or self.worker)
        assert response.status_code == 200, response.text
        jobs: list[dict[str, Any]] = response.json()
        return jobs


@pytest.fixture
def api(database_url: str) -> Iterator[Api]:
    settings = Settings(database_url=database_url, job_timeout=60, retry_base_seconds=0)
    app = create_app(settings, sweeper=False)
    with TestClient(app) as client:
        # The app's store, driven on the app's own event loop.
        store = Blocking(app.state.runtime.store, client.portal)
        owner = store.owners.create_owner("alice")
        other_owner = store.owners.create_owner("mallory")
        add_endpoint(store, "alice", "pypi", open_intake=True)
        add_endpoint(store, "mallory", "evil", open_intake=False)
        source = issue(store, "pypi", "source", "feed")
        worker = issue(store, "pypi", "worker", "w1")
        other_worker = issue(store, "evil", "worker", "w9")
        yield Api(client, owner, other_owner, source, worker, other_worker)


@pytest.fixture
def engines(watch_database_url: str) -> Iterator[Callable[[], Engine]]:
    """Engines on one watcher database, each as a separate watcher process would have."""
    made: list[Engine] = []

    def make() -> Engine:
        made.append(create_watch_engine(watch_database_url))
        return made[-1]

    yield make
    for engine in made:
        engine.dispose()

"""Store fixtures: a Store on each database with a fake clock and a recording publisher."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from mainframe.clock import FakeClock
from mainframe.lifecycle.events import Event
from mainframe.store import Budget, Principal, Store
from mainframe.store.engine import create_store_engine

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
    store: Store
    clock: FakeClock
    published: Recorder
    owner: Principal
    source: Principal
    worker: Principal
    other_worker: Principal

    def submit(self, name: str = "pkg", version: str = "1.0", **kw: object) -> int:
        scan, _ = self.store.submit(
            self.source,
            endpoint=None,
            queue=str(kw.get("queue", "default")),
            name=name,
            version=version,
            kind="scan",
            payload=None,
        )
        return scan.id


@pytest.fixture
def world(database_url: str) -> Iterator[World]:
    clock = FakeClock()
    recorder = Recorder()
    engine = create_store_engine(database_url)
    store = Store(
        engine,
        Budget.of(job_timeout=JOB_TIMEOUT, max_attempts=MAX_ATTEMPTS),
        clock=clock,
        publish=recorder,
    )
    store.create_owner("alice")
    store.create_endpoint("pypi", owner="alice", open_intake=True)
    owner = store.authenticate(store.create_owner("bob"))
    store.create_endpoint("npm", owner="bob", open_intake=False)
    tokens = {
        "source": store.create_token(endpoint="npm", role="source", principal="feed"),
        "worker": store.create_token(endpoint="npm", role="worker", principal="w1"),
        "other": store.create_token(endpoint="npm", role="worker", principal="w2"),
    }
    found = {key: store.authenticate(secret) for key, secret in tokens.items()}
    assert owner is not None and all(found.values())
    yield World(
        store,
        clock,
        recorder,
        owner,
        found["source"],
        found["worker"],  # type: ignore[arg-type]
        found["other"],
    )  # type: ignore[arg-type]
    engine.dispose()

"""The delivery-stats API the watcher polls: closed windows, owner scope, 429 over the limit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anyio.from_thread import BlockingPortal
from fastapi.testclient import TestClient

from mainframe.api.app import build_runtime, create_app
from mainframe.clock import MICROS, FakeClock, rfc3339
from mainframe.settings import Settings
from tests.integration.conftest import blocking_store

START = 1_790_000_040 * MICROS  # a whole minute


@pytest.fixture
def stats_api(
    database_url: str, loop: BlockingPortal
) -> Iterator[tuple[TestClient, FakeClock, dict[str, str]]]:
    settings = Settings(database_url=database_url, stats_rate_per_minute=60, stats_burst=3)
    # Deliveries count in the minute of the database's clock: this store's clock is moved to
    # each moment before recording, and the app's clock starts at START on its own.
    recorded = FakeClock(START)
    store = blocking_store(database_url, loop, recorded)
    tokens = {
        "alice": store.owners.create_owner("alice"),
        "bob": store.owners.create_owner("bob"),
    }
    a = store.owners.create_endpoint(
        store.owners.owner_id("alice"), "a", open_intake=False, origin="cli"
    )
    b = store.owners.create_endpoint(
        store.owners.owner_id("bob"), "b", open_intake=False, origin="cli"
    )
    recorded.advance(5)
    store.deliveries.record(a.id, attempts=10, failures=3)
    store.deliveries.record(b.id, attempts=100, failures=100)
    recorded.advance(45)
    store.deliveries.record(a.id, attempts=5, failures=0)
    recorded.advance(11)
    store.deliveries.record(a.id, attempts=7, failures=7)
    store.close()
    clock = FakeClock(START)
    runtime = build_runtime(settings, clock=clock)
    with TestClient(create_app(settings, runtime=runtime, sweeper=False)) as client:
        yield client, clock, tokens


def ask(client: TestClient, token: str, start: int, end: int) -> object:
    return client.get(
        "/api/v1/deliveries/stats",
        params={"start": rfc3339(start), "end": rfc3339(end)},
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_closed_window_sums_only_the_owners_endpoints(stats_api) -> None:  # type: ignore[no-untyped-def]
    client, clock, tokens = stats_api
    clock.advance(120)
    body = ask(client, tokens["alice"], START, START + 60 * MICROS).json()  # type: ignore[attr-defined]
    assert body == {
        "start": rfc3339(START),
        "end": rfc3339(START + 60 * MICROS),
        "attempts": 15,
        "failures": 3,
        "complete": True,
    }


def test_an_open_window_is_not_complete(stats_api) -> None:  # type: ignore[no-untyped-def]
    client, clock, tokens = stats_api
    clock.advance(90)
    body = ask(client, tokens["alice"], START + 60 * MICROS, START + 120 * MICROS).json()  # type: ignore[attr-defined]
    assert body["complete"] is False and body["attempts"] == 7


def test_over_the_limit_answers_429_with_retry_after(stats_api) -> None:  # type: ignore[no-untyped-def]
    client, clock, tokens = stats_api
    clock.advance(120)
    statuses = [
        ask(client, tokens["alice"], START, START + 60 * MICROS).status_code  # type: ignore[attr-defined]
        for _ in range(4)
    ]
    assert statuses == [200, 200, 200, 429]
    refused = ask(client, tokens["alice"], START, START + 60 * MICROS)
    assert refused.headers["Retry-After"] == "1"  # type: ignore[attr-defined]
    assert refused.json()["error"] == "rate_limited"  # type: ignore[attr-defined]
    assert ask(client, tokens["bob"], START, START + 60 * MICROS).status_code == 200  # type: ignore[attr-defined]
    clock.advance(1)
    assert ask(client, tokens["alice"], START, START + 60 * MICROS).status_code == 200  # type: ignore[attr-defined]


def test_bad_windows_are_refused(stats_api) -> None:  # type: ignore[no-untyped-def]
    client, _, tokens = stats_api
    assert ask(client, tokens["alice"], START + MICROS, START + 60 * MICROS).status_code == 422  # type: ignore[attr-defined]
    assert ask(client, tokens["alice"], START, START).status_code == 422  # type: ignore[attr-defined]
    missing = client.get(
        "/api/v1/deliveries/stats", headers={"Authorization": f"Bearer {tokens['alice']}"}
    )
    assert missing.status_code == 422
    assert client.get("/api/v1/deliveries/stats?start=x&end=y").status_code == 401

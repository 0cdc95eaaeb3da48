"""A source's single submissions that reach the store while its last is at the database go
together in one statement, on both databases, and each caller still gets what it would have
got alone: its own scan, the live scan of a key sent twice, or its own refusal."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import ScanReady
from mainframe.store import ScanSpec
from mainframe.store.engine.database import Invalid
from tests.integration.conftest import World


class Counted:
    """A part of the store's database (intake, results, leasing), counting the one-statement
    transactions (`single`) it is asked for."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.statements = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def single(self, **kwargs: Any) -> AbstractAsyncContextManager[Any]:
        self.statements += 1
        found: AbstractAsyncContextManager[Any] = self.db.single(**kwargs)
        return found


def submit_at_once(world: World, specs: list[ScanSpec]) -> tuple[list[Any], Counted]:
    """Every spec submitted by the world's source at the same moment, as concurrent requests
    of one feed would; each outcome is a (scan, created) pair or the error raised."""
    intake = world.store.target.intake
    counted = intake.db = Counted(intake.db)

    async def all_at_once() -> list[Any]:
        # Another write holds the database meanwhile: SQLite's first statement waits for it
        # (uncontended, a SQLite statement never gives the event loop up, so none would meet
        # it); PostgreSQL's runs beside it.
        held, release = asyncio.Event(), asyncio.Event()

        async def other_write() -> None:
            async with counted.db.write():
                held.set()
                await release.wait()

        holder = asyncio.create_task(other_write())
        await held.wait()
        calls = [
            asyncio.create_task(intake.submit(world.source, endpoint=None, spec=spec))
            for spec in specs
        ]
        await asyncio.sleep(0.01)
        release.set()
        await holder
        return await asyncio.gather(*calls, return_exceptions=True)

    return world.store.run(all_at_once), counted


def test_submissions_that_meet_go_in_one_statement_each_with_its_scan(world: World) -> None:
    specs = [ScanSpec(f"pkg{n}", "1.0", queue="npm", payload=f'{{"n": {n}}}') for n in range(8)]
    outcomes, counted = submit_at_once(world, specs)
    assert counted.statements == 2, "the first went alone, the seven that met it together"
    assert all(created for _, created in outcomes)
    assert [(s.name, s.queue, s.payload, s.status) for s, _ in outcomes] == [
        (f"pkg{n}", "npm", f'{{"n": {n}}}', Status.QUEUED) for n in range(8)
    ]
    assert len({scan.id for scan, _ in outcomes}) == 8
    ready = [e.scan.scan_id for e in world.published.of(ScanReady)]
    assert sorted(ready) == sorted(scan.id for scan, _ in outcomes), "each announced once"
    leased = world.store.leasing.lease(world.worker, 10)
    assert sorted(job.name for job in leased) == [f"pkg{n}" for n in range(8)]


def test_large_submissions_that_meet_go_in_statements_no_larger_than_a_request(
    world: World,
) -> None:
    big = '"' + "x" * 600_000 + '"'
    specs = [ScanSpec(f"big{n}", "1", payload=big) for n in range(3)] + [ScanSpec("small", "1")]
    outcomes, counted = submit_at_once(world, specs)
    assert all(created for _, created in outcomes)
    assert [scan.payload == big for scan, _ in outcomes] == [True, True, True, False]
    assert counted.statements == 3, "the first alone; then big1, then big2 with small"


def test_a_key_sent_twice_at_once_makes_one_scan_both_callers_see(world: World) -> None:
    specs = [ScanSpec("first", "1"), ScanSpec("twice", "1"), ScanSpec("twice", "1")]
    outcomes, _ = submit_at_once(world, specs)
    (_, made_first), (twice, created), (again, created_again) = outcomes
    assert made_first and created and not created_again
    assert again.id == twice.id, "the second finds the live scan the first made"


def test_a_value_the_database_refuses_refuses_only_its_sender(
    world: World, database_url: str
) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite stores a NUL in a text like any other character")
    specs = [ScanSpec("lead", "1"), ScanSpec("ok", "1"), ScanSpec("bad\x00", "1"),
             ScanSpec("fine", "1")]  # fmt: skip
    outcomes, _ = submit_at_once(world, specs)
    assert isinstance(outcomes[2], Invalid)
    assert [scan.name for scan, _ in (outcomes[0], outcomes[1], outcomes[3])] == [
        "lead",
        "ok",
        "fine",
    ]
    leased = world.store.leasing.lease(world.worker, 10)
    assert sorted(job.name for job in leased) == ["fine", "lead", "ok"]

"""The coalescer: a key's calls that arrive while its last run is at the database wait and
go together in one run, each caller getting its own item's outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from mainframe.store.work.coalesce import Coalescer


class Runs:
    """A run that records its items and holds until released, so a test decides when the
    database "answers"."""

    def __init__(self, failing: tuple[int, ...] = ()) -> None:
        self.seen: list[tuple[str, list[int]]] = []
        self.gate = asyncio.Event()
        self.failing = failing  # the runs (counted from 1) whose database never answers

    async def __call__(self, key: str, items: list[int]) -> Sequence[int | Exception]:
        self.seen.append((key, items))
        await self.gate.wait()
        if len(self.seen) in self.failing:
            raise ConnectionError("the database went away")
        return [ValueError(f"odd {n}") if n % 2 else n * 10 for n in items]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def one_running_two_waiting(
    together: Coalescer[str, int, int], runs: Runs
) -> tuple[asyncio.Future[int], list[asyncio.Future[int]]]:
    """A call at the database, two more that arrive meanwhile, and then the database answers."""
    first = asyncio.ensure_future(together("a", 2))
    await settle()
    waiting = [asyncio.ensure_future(together("a", n)) for n in (4, 6)]
    await settle()
    runs.gate.set()
    return first, waiting


def test_a_lone_call_runs_at_once_and_alone() -> None:
    async def scenario() -> None:
        runs = Runs()
        runs.gate.set()
        together = Coalescer(runs)
        assert await together("a", 2) == 20
        assert await together("a", 4) == 40
        assert runs.seen == [("a", [2]), ("a", [4])]

    asyncio.run(scenario())


def test_calls_that_arrive_meanwhile_go_together_each_with_its_own_outcome() -> None:
    async def scenario() -> None:
        runs = Runs()
        together = Coalescer(runs)
        first = asyncio.ensure_future(together("a", 2))
        await settle()
        rest = [asyncio.ensure_future(together("a", n)) for n in (4, 5, 6)]
        other = asyncio.ensure_future(together("b", 8))
        await settle()
        assert runs.seen == [("a", [2]), ("b", [8])], "another key never waits for this one"
        runs.gate.set()
        assert await first == 20
        assert await rest[0] == 40 and await rest[2] == 60 and await other == 80
        with pytest.raises(ValueError, match="odd 5"):
            await rest[1]
        assert runs.seen[2:] == [("a", [4, 5, 6])]
        assert not together._lanes, "nothing is kept once every call is answered"

    asyncio.run(scenario())


def test_a_failed_run_fails_only_its_own_callers() -> None:
    async def scenario() -> None:
        runs = Runs(failing=(2,))
        together = Coalescer(runs)
        first, waiting = await one_running_two_waiting(together, runs)
        assert await first == 20
        for call in waiting:
            with pytest.raises(ConnectionError):
                await call
        assert await together("a", 8) == 80, "the key runs again after a failure"

    asyncio.run(scenario())


def test_calls_waiting_behind_a_run_that_raised_fail_with_it_without_a_run() -> None:
    async def scenario() -> None:
        runs = Runs(failing=(1,))
        together = Coalescer(runs)
        first, waiting = await one_running_two_waiting(together, runs)
        for call in (first, *waiting):
            with pytest.raises(ConnectionError):
                await call
        assert runs.seen == [("a", [2])], "they waited one deadline, not two"
        assert not together._lanes

    asyncio.run(scenario())


def test_a_run_takes_at_most_most_items_and_skips_callers_gone() -> None:
    async def scenario() -> None:
        runs = Runs()
        together = Coalescer(runs, most=2)
        first = asyncio.ensure_future(together("a", 0))
        await settle()
        waiting = [asyncio.ensure_future(together("a", n)) for n in (2, 4, 6, 8)]
        await settle()
        waiting[1].cancel()
        runs.gate.set()
        await first
        assert [await waiting[i] for i in (0, 2, 3)] == [20, 60, 80]
        assert runs.seen == [("a", [0]), ("a", [2, 6]), ("a", [8])]

    asyncio.run(scenario())


def test_several_runs_of_a_key_may_be_at_the_database_at_once() -> None:
    async def scenario() -> None:
        runs = Runs()
        together = Coalescer(runs, running=2)
        calls = [asyncio.ensure_future(together("a", n)) for n in (2, 4, 6, 8)]
        await settle()
        assert runs.seen == [("a", [2]), ("a", [4])]
        runs.gate.set()
        assert [await call for call in calls] == [20, 40, 60, 80]
        assert ("a", [6, 8]) in runs.seen and len(runs.seen) == 3

    asyncio.run(scenario())

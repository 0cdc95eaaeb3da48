"""Calls that meet at the database go together: while a key's earlier calls are at the
database, its next ones wait and then run as one statement (docs/performance.md, *Intake
together*). A call that finds nothing of its key running goes at once, alone, so a quiet
sender waits for nobody; a busy one pays one statement and one commit for many calls."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Item = TypeVar("Item")
Out = TypeVar("Out")

# One outcome per item, in the items' order: its value, or the error its caller gets.
Run = Callable[[Key, list[Item]], Awaitable[Sequence[Out | Exception]]]

# The most text a statement of items that met carries: a bulk request's default bound, so a
# run of large items never sends the database more at once than one request may.
STATEMENT_BYTES = 1_048_576


def within(items: Sequence[Item], weight: Callable[[Item], int]) -> list[list[Item]]:
    """The items in order, in runs whose weight (their text in a statement) stays within
    STATEMENT_BYTES; an item heavier than that goes in a run of its own."""
    runs: list[list[Item]] = [[]]
    size = 0
    for item in items:
        if runs[-1] and size + weight(item) > STATEMENT_BYTES:
            runs.append([])
            size = 0
        runs[-1].append(item)
        size += weight(item)
    return runs


async def by_runs(
    items: list[Item],
    weight: Callable[[Item], int],
    alone: Callable[[Item], Awaitable[Out]],
    together: Callable[[list[Item]], Awaitable[list[Out]]],
) -> list[Out]:
    """The outcomes of items that met, in order: each run of `within` as one statement
    (`together`), and a run of one item by the statement it has alone (`alone`)."""
    done: list[Out] = []
    for run in within(items, weight):
        done += [await alone(run[0])] if len(run) == 1 else await together(run)
    return done


@dataclass
class _Lane(Generic[Item, Out]):
    running: int = 0
    waiting: list[tuple[Item, asyncio.Future[Out]]] = field(default_factory=list)


class Coalescer(Generic[Key, Item, Out]):
    """At most `running` runs of a key at once; the calls that arrive meanwhile wait and go
    together, up to `most` a run. A run's outcomes are its items' own; a run that raises
    (the database did not answer) fails its callers and those waiting behind it at once, so
    none waits out a second deadline after the first."""

    def __init__(self, run: Run[Key, Item, Out], *, running: int = 1, most: int = 100) -> None:
        self._run = run
        self._running = running
        self._most = most
        self._lanes: dict[Key, _Lane[Item, Out]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, key: Key, item: Item) -> Out:
        lane = self._lanes.setdefault(key, _Lane())
        if lane.running >= self._running:
            waiter: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
            lane.waiting.append((item, waiter))
            return await waiter
        lane.running += 1
        try:
            [outcome] = await self._run(key, [item])
        except Exception as exc:
            _fail(lane.waiting, exc)
            raise
        finally:
            self._after(key, lane)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _after(self, key: Key, lane: _Lane[Item, Out]) -> None:
        """A run ended: its slot goes to the calls that waited, or is given back."""
        if _waiting(lane):
            task = asyncio.create_task(self._drain(key, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._release(key, lane)

    async def _drain(self, key: Key, lane: _Lane[Item, Out]) -> None:
        try:
            while _waiting(lane):
                batch, lane.waiting = lane.waiting[: self._most], lane.waiting[self._most :]
                await self._together(key, lane, batch)
        finally:
            self._release(key, lane)

    def _release(self, key: Key, lane: _Lane[Item, Out]) -> None:
        lane.running -= 1
        if not lane.running:
            _fail(lane.waiting, RuntimeError("the run these calls waited for was stopped"))
            del self._lanes[key]

    async def _together(
        self, key: Key, lane: _Lane[Item, Out], batch: list[tuple[Item, asyncio.Future[Out]]]
    ) -> None:
        try:
            outcomes = await self._run(key, [item for item, _ in batch])
        except Exception as exc:
            _fail(batch + lane.waiting, exc)
            return
        for (_, waiter), outcome in zip(batch, outcomes, strict=True):
            if waiter.done():  # its caller went away meanwhile
                continue
            if isinstance(outcome, Exception):
                waiter.set_exception(outcome)
            else:
                waiter.set_result(outcome)


def _waiting(lane: _Lane[Item, Out]) -> bool:
    """Whether calls still wait, once those whose caller went away (cancelled) are dropped."""
    lane.waiting = [(item, waiter) for item, waiter in lane.waiting if not waiter.done()]
    return bool(lane.waiting)


def _fail(waiting: list[tuple[Item, asyncio.Future[Out]]], exc: Exception) -> None:
    for _, waiter in waiting:
        if not waiter.done():
            waiter.set_exception(exc)

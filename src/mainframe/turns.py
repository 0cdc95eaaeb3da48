"""A request of many items (a bulk submission of a thousand scans) is worked in slices, with
the event loop running the process's other requests between them: a slice takes well under a
millisecond where the whole took ten or more (docs/performance.md, *Bulk requests in
slices*)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import TypeVar

T = TypeVar("T")

# Items a slice takes: checking a submitted scan or building a scan's record from its row
# costs 5-12 µs, so a slice stays within about a millisecond on a busy machine.
ITEMS_PER_TURN = 64


async def in_turns(items: Iterable[T], per_turn: int = ITEMS_PER_TURN) -> AsyncIterator[T]:
    """The items, in order, the event loop let run after every `per_turn` of them."""
    for index, item in enumerate(items):
        if index and index % per_turn == 0:
            await asyncio.sleep(0)
        yield item

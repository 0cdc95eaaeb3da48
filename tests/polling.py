"""Waiting for something another process or thread makes happen: ask again until it has, or
until a deadline, never a fixed sleep that is too long on a fast machine and too short on a
loaded one."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# How often a condition is asked again (seconds): short beside the waits of the suite (a
# hook's delivery, a lease's lapse), long enough not to busy a loopback server.
EVERY_S = 0.05


def wait_for(found: Callable[[], T], *, timeout: float, what: str, every: float = EVERY_S) -> T:
    """The first truthy answer of `found`, asked every `every` seconds for at most `timeout`
    seconds (and so a bounded number of times); an AssertionError naming `what` after."""
    deadline = time.monotonic() + timeout
    for _ in range(math.ceil(timeout / every) + 1):
        answer = found()
        if answer:
            return answer
        if time.monotonic() >= deadline:
            break
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout} s")


async def wait_until(
    found: Callable[[], T], *, timeout: float, what: str, every: float = EVERY_S
) -> T:
    """`wait_for` on an event loop: the loop runs what is awaited between the questions."""
    deadline = time.monotonic() + timeout
    for _ in range(math.ceil(timeout / every) + 1):
        answer = found()
        if answer:
            return answer
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(every)
    raise AssertionError(f"{what}: not within {timeout} s")

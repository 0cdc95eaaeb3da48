"""How route handlers call the synchronous store without stalling the event loop.

SQLite runs inline on the loop: one process has one writer anyway, statements take
microseconds, and a thread hop per call would cost more than the query. PostgreSQL calls go
to a bounded thread pool the size of the connection pool, so waits on the network overlap."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread

P = ParamSpec("P")
T = TypeVar("T")


class StoreRunner:
    def __init__(self, *, inline: bool, threads: int) -> None:
        self.inline = inline
        self._limiter = anyio.CapacityLimiter(threads)

    async def __call__(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self.inline:
            return fn(*args, **kwargs)
        call = functools.partial(fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

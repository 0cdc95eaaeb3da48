"""The async store driven from synchronous tests: every coroutine method of a store object
runs on one event loop (an anyio blocking portal in its own thread), so the same test code
exercises SQLite inline and PostgreSQL through asyncpg, exactly as the server does."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal


class Blocking:
    """A proxy: coroutine methods become blocking calls on the portal's loop; attributes
    that are objects of the store (its capabilities) are proxied the same way."""

    def __init__(self, target: Any, portal: BlockingPortal) -> None:
        self._target = target
        self._portal = portal

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if inspect.iscoroutinefunction(attr):
            return functools.partial(self._call, attr)
        if type(attr).__module__.startswith("mainframe.store") and not isinstance(attr, type):
            return Blocking(attr, self._portal)
        return attr

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return self._portal.call(functools.partial(fn, *args, **kwargs))

    def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run any coroutine function on the store's loop (for tests that need a Tx)."""
        return self._call(fn, *args, **kwargs)

    @property
    def target(self) -> Any:
        return self._target


@contextmanager
def portal() -> Iterator[BlockingPortal]:
    """An event loop in a thread for the duration of a test."""
    with start_blocking_portal(backend="asyncio") as found:
        yield found

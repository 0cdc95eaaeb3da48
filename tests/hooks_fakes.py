"""Fakes beside the dispatcher's ports, for tests: an in-memory hook book, a scripted
resolver, and a network backend that refuses to open any socket that is not to loopback, so
a test of a refused address cannot send a packet off the machine even when the code under
test is wrong."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any

import httpcore

from mainframe.clock import Clock, SystemClock
from mainframe.store.hooks.hooks import HookTarget


class FakeResolver:
    """Answers from a script: each host maps to successive answers (the last one repeats),
    so a test can rebind a name between two attempts."""

    def __init__(self, answers: dict[str, Sequence[Sequence[str]]]) -> None:
        self.answers = {host: [list(a) for a in seq] for host, seq in answers.items()}
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        script = self.answers.get(host)
        if not script:
            raise OSError(f"fake resolver: unknown host {host}")
        return script.pop(0) if len(script) > 1 else list(script[0])


class LoopbackOnlyNetwork(httpcore.AsyncNetworkBackend):
    """The real network, but only to loopback addresses; anything else fails to connect and
    is recorded in `refused`."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.inner = inner or httpcore.AnyIOBackend()
        self.connected: list[str] = []
        self.refused: list[str] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False  # a name would be resolved by the inner backend: never allowed
        if not loopback:
            self.refused.append(host)
            raise httpcore.ConnectError(f"test network: {host} is not a loopback address")
        self.connected.append(host)
        return await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("test network: no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class MemoryHookBook:
    """The dispatcher's store calls over dicts, with the store's disabling rule; it stamps
    with its own clock, as the store stamps with the database's."""

    def __init__(self, targets: Sequence[HookTarget], *, clock: Clock | None = None) -> None:
        self.hooks = {t.hook_id: t for t in targets}
        self.clock = clock or SystemClock()
        self.disabled: dict[int, str] = {}
        self.failures = dict.fromkeys(self.hooks, 0)
        self.attempts: list[tuple[int, int, bool]] = []  # (endpoint id, at, failed)
        self.delivered_at: dict[int, int] = {}

    async def targets(self, endpoint_id: int) -> list[HookTarget]:
        return [
            t
            for t in self.hooks.values()
            if t.endpoint_id == endpoint_id and t.hook_id not in self.disabled
        ]

    async def record_attempt(self, endpoint_id: int, *, failed: bool) -> None:
        self.attempts.append((endpoint_id, self.clock.now_us(), failed))

    async def record_notification(
        self, hook_id: int, *, delivered: bool, disable_after: int
    ) -> bool:
        if delivered:
            self.failures[hook_id] = 0
            self.delivered_at[hook_id] = self.clock.now_us()
            return False
        self.failures[hook_id] = self.failures.get(hook_id, 0) + 1
        if self.failures[hook_id] >= disable_after and hook_id not in self.disabled:
            self.disabled[hook_id] = "consecutive_failures"
            return True
        return False

    async def disable(self, hook_id: int, *, reason: str) -> bool:
        if hook_id in self.disabled:
            return False
        self.disabled[hook_id] = reason
        return True

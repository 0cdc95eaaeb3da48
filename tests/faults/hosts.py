"""Several hosts on one machine for the fault tests: network namespaces joined by a Linux
bridge, a TCP forwarder that lets them reach PostgreSQL on loopback over that bridge, and a
wall clock set off by libfaketime. Every packet stays on this machine: the namespaces have no
route but the bridge's own subnet."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import NoReturn

import pytest

from tests.conftest import IN_CI

SUBNET = "10.77"  # 10.77.N.0/24, the first N no address of this machine already uses
BRIDGE_OCTET = 1
FIRST_HOST_OCTET = 11
IP_TIMEOUT_S = 15.0

# The library `faketime -m -f SPEC` preloads; the dynamic linker expands $LIB itself
# (lib/x86_64-linux-gnu on Debian). The multi-threaded variant, as the server runs threads.
FAKETIME_LIBRARY = "/usr/$LIB/faketime/libfaketimeMT.so.1"


def missing(capability: str) -> NoReturn:
    """A capability the test needs is absent: a failure in CI, where it must be present,
    and a skip elsewhere."""
    if IN_CI:
        pytest.fail(f"{capability} (required in CI)")
    pytest.skip(capability)


class NetworkUnavailable(Exception):
    """This machine will not let us build namespaces and bridges (no root, no CAP_NET_ADMIN)."""


@dataclass(frozen=True)
class Host:
    """A network namespace joined to the bridge by a veth pair."""

    netns: str
    address: str
    veth: str  # its end of the pair, inside the namespace
    peer: str  # the bridge's end, in the root namespace

    @property
    def prefix(self) -> list[str]:
        """The command prefix that runs a program inside this host."""
        return ["ip", "netns", "exec", self.netns]


class Network:
    """A bridge with an address in the root namespace and `count` hosts joined to it. Names
    carry this process's id, so runs never collide, and `close` removes whatever exists."""

    def __init__(self, count: int = 3) -> None:
        tag = os.getpid()
        self.bridge = f"mfbr{tag}"  # interface names stay under 16 bytes for any pid
        self.subnet = _free_subnet()
        self.address = f"{self.subnet}.{BRIDGE_OCTET}"
        self.hosts = [
            Host(
                netns=f"mf{tag}h{n}",
                address=f"{self.subnet}.{FIRST_HOST_OCTET + n}",
                veth=f"mfn{tag}x{n}",
                peer=f"mfh{tag}x{n}",
            )
            for n in range(count)
        ]

    def open(self) -> None:
        """Build the bridge and the hosts; NetworkUnavailable when the machine refuses."""
        self.close()  # a run that died with this pid may have left its names behind
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
        except subprocess.CalledProcessError as exc:
            raise NetworkUnavailable(exc.stderr.strip()) from exc
        _ip("addr", "add", f"{self.address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for host in self.hosts:
            _ip("netns", "add", host.netns)
            _ip(
                "link",
                "add",
                host.peer,
                "type",
                "veth",
                "peer",
                "name",
                host.veth,
                "netns",
                host.netns,
            )
            _ip("link", "set", host.peer, "master", self.bridge)
            _ip("link", "set", host.peer, "up")
            _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", host.veth)
            _ip("-n", host.netns, "link", "set", host.veth, "up")
            _ip("-n", host.netns, "link", "set", "lo", "up")

    def close(self) -> None:
        """Delete the namespaces (their veth ends, and so the peers, go with them), any peer
        left behind, and the bridge. Safe to call on a half-built network."""
        for host in self.hosts:
            _ip_if_present("netns", "del", host.netns)
            _ip_if_present("link", "del", host.peer)
        _ip_if_present("link", "del", self.bridge)

    def leftovers(self) -> list[str]:
        """Names of ours that still exist: empty after `close`."""
        links = _ip_output("-o", "link", "show")
        spaces = _ip_output("netns", "list")
        names = [self.bridge] + [h.peer for h in self.hosts]
        left = [name for name in names if f" {name}:" in links or f" {name}@" in links]
        return left + [h.netns for h in self.hosts if h.netns in spaces.split()]

    def link_down(self, host: Host) -> None:
        """Pull the host's cable: its end of the veth pair goes down, from inside the host."""
        _ip("-n", host.netns, "link", "set", host.veth, "down")

    def link_up(self, host: Host) -> None:
        _ip("-n", host.netns, "link", "set", host.veth, "up")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=IP_TIMEOUT_S)


def _ip_output(*args: str) -> str:
    done = subprocess.run(
        ["ip", *args], check=True, capture_output=True, text=True, timeout=IP_TIMEOUT_S
    )
    return done.stdout


def _ip_if_present(*args: str) -> None:
    # Teardown of something that may never have been built: a failure means it is not there.
    subprocess.run(["ip", *args], check=False, capture_output=True, timeout=IP_TIMEOUT_S)


def _free_subnet() -> str:
    taken = _ip_output("-4", "-o", "addr", "show") + _ip_output("-4", "route", "show")
    for third in range(256):
        prefix = f"{SUBNET}.{third}"
        if f"{prefix}." not in taken:
            return prefix
    raise NetworkUnavailable(f"every {SUBNET}.N.0/24 is in use on this machine")


# A host whose link is down never acknowledges what the forwarder sends it: drop such a
# connection within seconds, as PostgreSQL with tcp_user_timeout and TCP keepalives set would
# on a real network. Without this the forwarder (always alive on loopback) would keep the
# vanished host's session open, with the row locks of a transaction it had open, until TCP
# gave up on the host: 15 minutes of retransmissions, or two hours of keepalive silence.
DEAD_PEER_IDLE_S = 1
DEAD_PEER_INTERVAL_S = 1
DEAD_PEER_PROBES = 3
DEAD_PEER_UNACKED_MS = 3000
CHUNK_BYTES = 65536  # read at most this much at a time; drain() bounds what is buffered
CONNECT_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 10.0


class Forwarder:
    """Relays TCP connections from `listen_host` (an ephemeral port) to `target`, on an
    asyncio loop in a thread of the test process, at most `max_connections` at once.
    `swallow()` stops every byte in both directions without closing anything, as a stuck
    pooler or a partitioned path does (the kernel keeps acknowledging, so neither side hears
    of a failure, and a new connection is accepted and hears nothing); `heal()` lets them
    through again."""

    def __init__(
        self, listen_host: str, target: tuple[str, int], *, max_connections: int = 256
    ) -> None:
        self.listen_host = listen_host
        self.target = target
        self.max_connections = max_connections
        self.port = 0
        self.accepted = 0
        self.refused = 0
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._flowing: asyncio.Event | None = None
        self._relays: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._run, name="forwarder", daemon=True)

    def __enter__(self) -> Forwarder:
        self._thread.start()
        if not self._ready.wait(STOP_TIMEOUT_S):
            raise AssertionError("the forwarder did not start")
        if self._error is not None:
            raise AssertionError(f"the forwarder could not listen: {self._error}")
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(STOP_TIMEOUT_S)

    def swallow(self) -> None:
        assert self._loop is not None and self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def heal(self) -> None:
        assert self._loop is not None and self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.set)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by __enter__ if it happened before ready
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._flowing = asyncio.Event()
        self._flowing.set()
        server = await asyncio.start_server(self._relay, self.listen_host, 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stopping.wait()
        server.close()
        for relay in list(self._relays):
            relay.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)

    async def _relay(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            if len(self._relays) > self.max_connections:
                self.refused += 1
                return
            self.accepted += 1
            _drop_when_silent(to_client.get_extra_info("socket"))
            try:
                upstream, to_upstream = await asyncio.wait_for(
                    asyncio.open_connection(*self.target), CONNECT_TIMEOUT_S
                )
            except (OSError, TimeoutError):
                return
            assert self._flowing is not None
            pipes = (
                _pipe(client, to_upstream, self._flowing),
                _pipe(upstream, to_client, self._flowing),
            )
            try:
                await asyncio.gather(*pipes)
            finally:
                to_upstream.close()
        finally:
            to_client.close()
            self._relays.discard(task)


def _drop_when_silent(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, DEAD_PEER_IDLE_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, DEAD_PEER_INTERVAL_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, DEAD_PEER_PROBES)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, DEAD_PEER_UNACKED_MS)


async def _pipe(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, flowing: asyncio.Event
) -> None:
    try:
        while await flowing.wait() and (chunk := await source.read(CHUNK_BYTES)):
            await flowing.wait()  # a chunk read just as the link was swallowed waits for the heal
            sink.write(chunk)
            await sink.drain()
    except OSError:
        pass  # a reset or a timed-out peer ends the relay like a close does
    finally:
        sink.close()  # the other direction then reads EOF and ends too


def skewed_clock(offset_s: int) -> dict[str, str]:
    """Environment that runs a process with its wall clock `offset_s` seconds off and its
    monotonic clock true, so asyncio's timers keep working: what `faketime -m -f +Ns` sets,
    without the wrapper's fork, so the PID the test starts (and stops) is the server's.
    No offset means no libfaketime at all."""
    if offset_s == 0:
        return {}
    return {
        "LD_PRELOAD": FAKETIME_LIBRARY,
        "FAKETIME": f"{offset_s:+d}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def clock_skew_works(offset_s: int) -> str | None:
    """None when a process started with `skewed_clock(offset_s)` sees its clock that far off;
    otherwise why not (faketime missing, or the library not preloaded)."""
    if shutil.which("faketime") is None:
        return "faketime is not installed (Debian package faketime)"
    env = {**os.environ, **skewed_clock(offset_s)}
    done = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    try:
        seen = float(done.stdout.strip()) - time.time()
    except ValueError:
        return f"a process under libfaketime failed: {done.stderr.strip()}"
    if abs(seen - offset_s) > 5:
        return f"libfaketime did not skew the clock ({seen:+.0f} s): {done.stderr.strip()}"
    return None

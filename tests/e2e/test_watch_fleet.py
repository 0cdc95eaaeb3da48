"""The watcher fleet end to end, over real sockets on loopback: three `mainframe watch`
processes on one PostgreSQL keep together within one source's budget and concurrency limit
and still complete every window once; and each failure class a real server or socket can
produce (no answer, a reset, 502, 401, 403, 400) is recorded under its own class and retried
or not as docs/watch.md says, a refused credential raising its own alert in a real
Alertmanager."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from mainframe.clock import FakeClock, rfc3339
from mainframe.watch.command import build_watcher
from mainframe.watch.config import load_config
from mainframe.watch.database import create_watch_engine
from mainframe.watch.observations import PollClass
from mainframe.watch.state import WatchStore
from mainframe.watch.windows import Window
from tests.alertmanager import active
from tests.integration.test_watch_engine import Sleeper

RATE, BURST, CONCURRENCY = 4.0, 2, 2
WINDOWS = 48  # the lookback of the fleet test, in one-minute windows
SERVE_S = 0.15  # how long the fake source takes to answer: long enough to overlap requests
DELIVERY_S = 1.0  # how late a request may arrive after its permit on a busy machine


class Ledger:
    """What a fake source saw: each request's window, arrival and departure."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, float, float]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    def enter(self) -> float:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        return time.monotonic()

    def leave(self, start: str, arrived: float) -> None:
        with self.lock:
            self.in_flight -= 1
            self.requests.append((start, arrived, time.monotonic()))


@contextmanager
def stats_source(
    ledger: Ledger, answer: Callable[[Window], tuple[int, dict[str, object]]]
) -> Iterator[str]:
    """A Mainframe-like stats API on a free loopback port, answering `answer(window)`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            arrived = ledger.enter()
            query = parse_qs(urlparse(self.path).query)
            start = query["start"][0]
            time.sleep(SERVE_S)
            status, body = answer(Window.from_key(start + "/60s"))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            ledger.leave(start, arrived)

        def log_message(self, *_args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def counts(window: Window) -> tuple[int, dict[str, object]]:
    body = {
        "start": rfc3339(window.start_us),
        "end": rfc3339(window.end_us),
        "attempts": 50,
        "failures": 1,
        "complete": True,
    }
    return 200, body


def most_within(arrivals: list[float], seconds: float) -> int:
    """The most requests that arrived within any span of `seconds`."""
    arrivals = sorted(arrivals)
    most, first = 0, 0
    for last, at in enumerate(arrivals):
        while at - arrivals[first] >= seconds:
            first += 1
        most = max(most, last - first + 1)
    return most


@pytest.mark.slow
@pytest.mark.parametrize("watch_database_url", ["postgresql"], indirect=True)
def test_three_watchers_keep_within_one_budget_and_complete_every_window_once(
    tmp_path: Path, watch_database_url: str
) -> None:
    ledger = Ledger()
    with stats_source(ledger, counts) as url:
        config = tmp_path / "watch.toml"
        config.write_text(f"""
database_url = "{watch_database_url}"
settle_seconds = 0
lookback_seconds = {WINDOWS * 60}
[sources.eu-west]
type = "mainframe"
url = "{url}"
token = "t"
requests_per_second = {RATE}
burst = {BURST}
max_concurrency = {CONCURRENCY}
[[sinks]]
type = "alertmanager"
url = "http://127.0.0.1:1"
[telemetry]
port = 0
""")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
        command = [sys.executable, "-m", "mainframe", "watch", "--config", str(config), "--once"]
        fleet = [
            subprocess.Popen(
                command,
                env=env | {"MAINFRAME_LOG_FORMAT": "json"},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        outputs = [proc.communicate(timeout=180) for proc in fleet]
    for proc, (_out, err) in zip(fleet, outputs, strict=True):
        assert proc.returncode == 0, err

    arrivals = [arrived for _, arrived, _ in ledger.requests]
    span = max(arrivals) - min(arrivals)
    rate = (len(arrivals) - 1) / span
    print(
        f"\nthree watchers: {len(arrivals)} requests in {span:.2f} s, {rate:.2f}/s "
        f"(budget {RATE}/s, burst {BURST}); {ledger.most_in_flight} in flight at most"
    )
    # The quota bounds when permits are granted; a request arrives a little after its permit,
    # later still on a busy machine, so arrivals within a span are held to the permits of that
    # span and of the DELIVERY_S before it. Without the quota the fleet would send 48 requests
    # in about four seconds, well over this bound.
    span_s = 3.0
    assert most_within(arrivals, span_s) <= BURST + RATE * (span_s + DELIVERY_S), "the budget"
    assert ledger.most_in_flight <= CONCURRENCY
    asked = [start for start, _, _ in ledger.requests]
    assert len(asked) == len(set(asked)) == WINDOWS, "every window asked for exactly once"
    engine = create_watch_engine(watch_database_url)
    try:
        store = WatchStore(engine, "eu-west")
        assert len(store.completed_keys(since_us=0)) == WINDOWS
        ticks = [
            json.loads(line)
            for _, err in outputs
            for line in err.splitlines()
            if '"watch_tick"' in line
        ]
        waits = sum(tick["quota_waits"] for tick in ticks)
        assert waits > 0 and all(tick["failed"] == {} for tick in ticks), "waits, not failures"
    finally:
        engine.dispose()


# Each failure class from a real socket.


@contextmanager
def loopback_port(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A loopback port whose every accepted connection is given to `handle`, until the
    block ends; connections `handle` leaves open are closed then."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn = listener.accept()[0]
            except TimeoutError:
                continue
            accepted.append(conn)
            handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in accepted:
            conn.close()
        listener.close()


def never_answer(_conn: socket.socket) -> None:
    """Keep the connection open and say nothing."""


def reset(conn: socket.socket) -> None:
    """Read the request, then reset the connection (RST, not FIN)."""
    conn.settimeout(1)
    with contextlib.suppress(OSError):
        conn.recv(65536)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def watch_config(tmp_path: Path, url: str, sink: str, timeout_s: float = 5.0) -> Path:
    path = tmp_path / "watch.toml"
    path.write_text(f"""
database_url = "sqlite:///{tmp_path / "watch.db"}"
settle_seconds = 5
lookback_seconds = 120
owner = "classes"
[sources.eu]
type = "mainframe"
url = "{url}"
token = "t"
timeout_seconds = {timeout_s}
[[sinks]]
type = "alertmanager"
url = "{sink}"
[telemetry]
port = 0
""")
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("status", "poll_class", "attempts"),
    [
        (502, PollClass.SERVER_ERROR, 5),  # retried within the tick, to the attempt bound
        (401, PollClass.AUTH_ERROR, 1),  # never retried
        (403, PollClass.AUTH_ERROR, 1),
        (400, PollClass.CLIENT_ERROR, 1),  # not retried: the request itself is wrong
    ],
)
def test_each_status_is_recorded_under_its_class_and_retried_or_not(
    tmp_path: Path, alertmanager: str, status: int, poll_class: PollClass, attempts: int
) -> None:
    ledger = Ledger()
    with stats_source(ledger, lambda _w: (status, {"detail": "no"})) as url:
        config = load_config(watch_config(tmp_path, url, alertmanager))
        clock = FakeClock(time.time_ns() // 1000)
        sleeper = Sleeper(clock)
        watcher = build_watcher(config, sleep=sleeper, clock=clock)
        try:
            report = watcher.engine.tick()
            watcher.relay.run_once()
            [key] = report.failed
            assert report.failed[key] is poll_class and report.stopped is poll_class
            assert [p.poll_class for p in watcher.store.for_source("eu").polls(key)] == [
                poll_class
            ] * attempts
            assert len(ledger.requests) == attempts, "the next window is left for the next tick"
            assert len(sleeper.delays) == attempts - 1, "backoff between server errors only"
            firing = active(alertmanager)
            if poll_class is PollClass.AUTH_ERROR:
                assert firing == {"MainframeWatchObserverAuthFailure"}
            else:
                assert "MainframeWatchObserverAuthFailure" not in firing
        finally:
            watcher.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["timeout", "reset"])
def test_no_answer_and_a_reset_are_classes_of_their_own(tmp_path: Path, kind: str) -> None:
    with loopback_port(never_answer if kind == "timeout" else reset) as port:
        url = f"http://127.0.0.1:{port}"
        config = load_config(watch_config(tmp_path, url, "http://127.0.0.1:1", timeout_s=0.5))
        clock = FakeClock(time.time_ns() // 1000)
        sleeper = Sleeper(clock)
        watcher = build_watcher(config, sleep=sleeper, clock=clock)
        try:
            report = watcher.engine.tick()
        finally:
            watcher.close()
    expected = PollClass.TIMEOUT if kind == "timeout" else PollClass.CONNECTION_ERROR
    [(key, poll_class)] = report.failed.items()
    assert poll_class is expected and report.stopped is expected and report.polls == 1
    assert sleeper.delays == [], "left for the next tick, not retried in this one"
    sample = watcher.telemetry.registry.get_sample_value
    assert sample("mainframe_watch_polls_total", {"source": "eu", "class": expected.value}) == 1
    assert Window.from_key(key).length_s == 60

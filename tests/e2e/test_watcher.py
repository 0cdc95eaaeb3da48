"""The watcher end to end: a real Mainframe serving rate-limited delivery stats, a real
Alertmanager receiving the alerts, driven through a failure burst, a throttling period in
which nothing may resolve, and recovery."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import inspect

from mainframe.clock import MICROS, FakeClock
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.schema import delivery_counts, endpoints
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.watch import tables
from mainframe.watch.command import build_watcher
from mainframe.watch.config import load_config
from mainframe.watch.database import create_watch_engine
from mainframe.watch.migrate import VERSION_TABLE, current_revision, head_revision
from mainframe.watch.observations import PollClass
from mainframe.watch.state import WatchStore
from tests.alertmanager import active
from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli

MINUTE = 60 * MICROS
# The server's stats quota in the burst test: tiny, so that two windows' polls spend it.
STATS_RATE_PER_MINUTE = 60
STATS_BURST = 2


def seed(url: str, minute_start: int, attempts: int, failures: int) -> None:
    """Counts filed under a past minute, as the dispatcher would have filed them then (the
    store itself only ever adds to the database clock's current minute)."""
    engine = create_store_engine(url)
    with engine.begin() as conn:
        endpoint_id = conn.execute(endpoints.select()).first().id  # type: ignore[union-attr]
        conn.execute(
            delivery_counts.insert().values(
                endpoint_id=endpoint_id,
                minute_us=minute_start,
                attempts=attempts,
                failures=failures,
            )
        )
    engine.dispose()


class Hog:
    """Spends the watcher's stats quota (same token) until stopped."""

    def __init__(self, url: str, token: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url, token), daemon=True)
        self._thread.start()

    def _run(self, url: str, token: str) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
            while not self._stop.is_set():
                http.get(
                    "/api/v1/deliveries/stats",
                    params={"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:01:00Z"},
                )
                # Every 10 ms: a token refills at a real-time instant, and the watcher comes
                # back only after a whole-second Retry-After, so the hog takes it first even
                # on a loaded machine (at 50 ms the watcher sometimes won the race).
                time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.mark.slow
def test_burst_throttling_and_recovery(tmp_path: Path, alertmanager: str) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    engine = create_store_engine(url)
    upgrade(engine)
    engine.dispose()
    token = cli(url, "owner", "create", "ops")
    cli(url, "endpoint", "create", "pypi", "--owner", "ops")
    now = time.time_ns() // 1000
    this_minute = now - now % MINUTE
    minute = {k: this_minute - k * MINUTE for k in range(1, 7)}  # minute[k] starts k minutes ago
    for k, (attempts, failures) in {
        6: (100, 1),
        5: (100, 2),
        4: (100, 60),
        3: (100, 55),
        2: (100, 1),
        1: (100, 0),
    }.items():
        seed(url, minute[k], attempts, failures)

    env = {
        "MAINFRAME_STATS_RATE_PER_MINUTE": str(STATS_RATE_PER_MINUTE),
        "MAINFRAME_STATS_BURST": str(STATS_BURST),
    }
    with ServerProcess(url, tmp_path, **env) as server:
        (tmp_path / "watch.toml").write_text(f"""
database_url = "sqlite:///{tmp_path / "watch.db"}"
window_seconds = 60
settle_seconds = 5
lookback_seconds = 240
max_attempts = 5
owner = "e2e"
[source]
type = "mainframe"
url = "{server.url}"
token = "{token}"
[delivery]
version = "v1"
ratio = 0.1
min_attempts = 20
absolute_failures = 0
[observer]
version = "v1"
max_checkpoint_age_seconds = 600
max_throttle_exhaustions = 2
max_outbox_age_seconds = 600
[[sinks]]
type = "alertmanager"
url = "{alertmanager}"
[telemetry]
port = 0
""")
        # The watcher's clock is set just after the window it should see last has closed.
        clock = FakeClock(minute[2] + 5 * MICROS + 1)

        def sleep(seconds: float) -> None:
            # Real time for the server's rate limit, the same on the watcher's clock (which
            # its shared quota keeps time by).
            time.sleep(seconds)
            clock.advance(seconds)

        watcher = build_watcher(load_config(tmp_path / "watch.toml"), sleep=sleep, clock=clock)
        try:
            # Failure burst: four windows, the stats API throttles after two requests.
            report = watcher.engine.tick()
            assert len(report.completed) == 4, report
            polls = [p.poll_class for k in report.completed for p in watcher.store.polls(k)]
            assert PollClass.THROTTLED in polls, "the tiny rate limit must have been hit"
            watcher.relay.run_once()
            assert "MainframeWatchDeliveryFailure" in active(alertmanager)
            checkpoint = watcher.store.checkpoint()
            assert checkpoint == minute[3] + MINUTE

            # Throttling period: the quota is gone; nothing may resolve or advance.
            clock.advance(60)
            hog = Hog(server.url, token)
            try:
                for _ in range(2):
                    throttled = watcher.engine.tick()
                    assert throttled.completed == []
                    clock.advance(1)
                watcher.relay.run_once()
            finally:
                hog.stop()
            assert watcher.store.checkpoint() == checkpoint
            assert active(alertmanager) == {
                "MainframeWatchDeliveryFailure",
                "MainframeWatchObserverThrottleExhaustion",
            }

            # Recovery: the quota refills and two healthy windows resolve both alerts. Real
            # time: the server's token bucket keeps it in another process, where no injected
            # clock reaches, and a probe would spend the very tokens it looks for. So: the
            # time a whole burst takes to refill after the hog's last request, and a margin.
            time.sleep(STATS_BURST * 60 / STATS_RATE_PER_MINUTE + 0.5)
            clock.advance(60)
            recovered = watcher.engine.tick()
            assert len(recovered.completed) == 2, recovered
            watcher.relay.run_once()
            # Alertmanager holds a resolved alert active until its endsAt, which the watcher
            # stamps from its own clock; the throttled ticks' sleeps can have moved that clock
            # a few seconds past the wall clock, so the resolution is waited for, not assumed.
            wait_for(lambda: active(alertmanager) == set(), timeout=30, what="both resolved")
            assert watcher.store.checkpoint() == minute[1] + MINUTE
        finally:
            watcher.close()
    assert all(record["event"] != "unhandled_error" for record in server.log_events())


@pytest.mark.parametrize("empty_database_url", ["sqlite", "postgresql"], indirect=True)
def test_watch_command_runs_one_pass_from_a_config_file(
    tmp_path: Path, empty_database_url: str
) -> None:
    # The watcher's database starts empty: `mainframe watch` migrates it with its own chain.
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    engine = create_store_engine(url)
    upgrade(engine)
    engine.dispose()
    token = cli(url, "owner", "create", "ops")
    cli(url, "endpoint", "create", "pypi", "--owner", "ops")
    with ServerProcess(url, tmp_path) as server:
        config = tmp_path / "watch.toml"
        config.write_text(f"""
database_url = "{empty_database_url}"
settle_seconds = 1
lookback_seconds = 180
[source]
type = "mainframe"
url = "{server.url}"
token_env = "WATCH_TOKEN"
[[sinks]]
type = "alertmanager"
url = "http://127.0.0.1:1"
[telemetry]
port = 0
""")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
        done = subprocess.run(
            [sys.executable, "-m", "mainframe", "watch", "--config", str(config), "--once"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env | {"WATCH_TOKEN": token},
            check=False,
        )
    assert done.returncode == 0, done.stderr
    engine = create_watch_engine(empty_database_url)
    try:
        assert current_revision(engine) == head_revision()
        found = set(inspect(engine).get_table_names())
        assert found == set(tables.metadata.tables) | {VERSION_TABLE}, "none of the server's"
        assert WatchStore(engine).checkpoint() is not None, "closed windows of zeros are complete"
    finally:
        engine.dispose()

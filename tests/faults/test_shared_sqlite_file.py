"""CLI commands and a watcher on the server's own SQLite file while workers run
(docs/reliability.md): a reader (`mainframe stats`), a writer (`mainframe token create`) and
`mainframe watch --once` keeping its tables in the same file never stall the server's
requests past a bound, never cost a 500, and every scan still finishes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.faults.load import Fleet, fill, provision, worker_loop
from tests.serverproc import ServerProcess, mainframe_env

COMMAND_ROUNDS = 4
TOP_UP = 500  # scans a source adds every 0.5 s, so the workers stay busy throughout
POLL_P99_BOUND_S = 1.0  # a locked file answers 503 after MAINFRAME_BUSY_WAIT_SECONDS at worst


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mainframe", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_commands_and_a_watcher_share_the_file_with_a_busy_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    worker, source = provision(url)
    owner = _run(["owner", "create", "watcher"], mainframe_env(url)).stdout.split()[-1]
    with ServerProcess(url, tmp_path, MAINFRAME_BUSY_WAIT_SECONDS="1") as server:
        submitted = [0]

        def top_up() -> None:
            while not feeding.is_set():
                fill(server.url, source, TOP_UP, start=submitted[0])
                submitted[0] += TOP_UP
                time.sleep(0.5)  # the source's pace (TOP_UP), not a wait for anything

        feeding = threading.Event()
        config = tmp_path / "watch.toml"
        config.write_text(
            f'database_url = "{url}"\nsettle_seconds = 1\nlookback_seconds = 120\n'
            f'[source]\ntype = "mainframe"\nurl = "{server.url}"\ntoken_env = "WATCH_TOKEN"\n'
            '[[sinks]]\ntype = "alertmanager"\nurl = "http://127.0.0.1:1"\n'
            "[telemetry]\nport = 0\n"
        )
        fleet, stop = Fleet([server.url]), threading.Event()
        threads = [
            threading.Thread(target=worker_loop, args=(fleet, worker, stop, n)) for n in range(6)
        ]
        feeder = threading.Thread(target=top_up)
        threads.append(feeder)
        for thread in threads:
            thread.start()
        failures = []
        try:
            env = mainframe_env(url)
            watch_env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
            for number in range(COMMAND_ROUNDS):
                commands = [
                    (["stats", "--json"], env),
                    (["token", "create", "--endpoint", "pypi", "--worker", f"x{number}"], env),
                    (
                        ["watch", "--config", str(config), "--once"],
                        watch_env | {"WATCH_TOKEN": owner},
                    ),
                ]
                for args, with_env in commands:
                    done = _run(args, with_env)
                    if done.returncode != 0:
                        failures.append((args, done.stderr[-500:]))
            feeding.set()
            feeder.join(timeout=60)  # its last top-up sent: `submitted` is final
            assert not feeder.is_alive(), "the source's last top-up never returned"
            deadline = time.monotonic() + 90
            while len(fleet.acknowledged) < submitted[0] and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            feeding.set()
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
        events = server.log_events()

    assert failures == []
    assert len(fleet.acknowledged) == submitted[0] >= COMMAND_ROUNDS * TOP_UP
    assert not [s for s in fleet.statuses if s >= 500 and s != 503], fleet.statuses
    latencies = sorted(fleet.latencies)
    p99 = latencies[int(len(latencies) * 0.99)]
    assert p99 < POLL_P99_BOUND_S, f"poll p99 {p99:.3f} s beside the commands"
    assert all(event["event"] != "unhandled_error" for event in events)
    print(
        f"shared SQLite file: {COMMAND_ROUNDS * 3} commands beside 6 workers, "
        f"{len(fleet.acknowledged)} scans finished, poll p99 {p99 * 1000:.0f} ms, "
        f"statuses {dict(fleet.statuses)}"
    )

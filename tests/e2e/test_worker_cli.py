"""`mainframe worker` run as an operator runs it, against a real server or none at all."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.serverproc import free_port


def test_a_worker_gives_up_on_a_server_that_stays_down_in_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mainframe", "worker", "--url", url, "--token", "mfw_x",
         "--idle-exit", "--give-up-after", "1", "--", "true"],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"mainframe: giving up on {url}: the server answered no poll for 1 s")
    assert time.monotonic() - started < 30

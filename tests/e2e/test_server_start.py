"""What `mainframe serve` tells an operator as it starts, outside a terminal: the token of the
first owner alone on the last line of stdout, one log line with the address it listens on,
and one line per request only when MAINFRAME_ACCESS_LOG asks for it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.serverproc import ServerProcess


def events_named(server: ServerProcess, name: str, *, at_least: int = 1) -> list[dict[str, Any]]:
    """The server's log events called `name`, waiting up to ten seconds for `at_least`."""
    deadline = time.monotonic() + 10
    while True:
        found = [e for e in server.log_events() if e.get("event") == name]
        if len(found) >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_the_server_says_where_it_listens_and_logs_no_requests(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    with ServerProcess(url, tmp_path, MAINFRAME_LOG_FORMAT="auto") as server:
        [listening] = events_named(server, "server_listening")
        assert listening["url"] == server.url and listening["level"] == "info"
        httpx.get(server.url + "/healthz", trust_env=False)
        # The listening line came after the health probes; nothing logged them.
        assert events_named(server, "request", at_least=0) == []
    token = server.stdout_path.read_text().splitlines()[-1]
    assert token.startswith("mfo_")


def test_access_logs_when_asked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    with ServerProcess(url, tmp_path, MAINFRAME_ACCESS_LOG="true") as server:
        httpx.get(server.url + "/openapi.json", trust_env=False)
        found = [e for e in events_named(server, "request", at_least=2)]
        line = next(e for e in found if e["path"] == "/openapi.json")
        assert line["method"] == "GET" and line["status"] == 200
        assert line["client"] == "127.0.0.1" and line["seconds"] >= 0

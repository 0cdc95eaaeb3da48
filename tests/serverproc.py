"""Real `mainframe` processes for end-to-end tests: the CLI, and servers on loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def mainframe_env(database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
    env.update({"MAINFRAME_DATABASE_URL": database_url, "MAINFRAME_LOG_FORMAT": "json"})
    # Retries are due at once unless a test is about their backoff (it sets its own base).
    env["MAINFRAME_RETRY_BASE_SECONDS"] = "0"
    env.update(extra)
    return env


def cli(database_url: str, *args: str, **extra_env: str) -> str:
    """Run `mainframe ARGS...` and return the last line of stdout (the new secret)."""
    done = subprocess.run(
        [sys.executable, "-m", "mainframe", *args],
        capture_output=True,
        text=True,
        env=mainframe_env(database_url, **extra_env),
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"mainframe {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip().splitlines()[-1]


class ServerProcess:
    """`mainframe serve` on a free loopback port, with its stdout and stderr kept in files."""

    def __init__(self, database_url: str, workdir: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stdout_path = workdir / f"server-{self.port}.out"
        self.stderr_path = workdir / f"server-{self.port}.err"
        self._out = self.stdout_path.open("w")
        self._err = self.stderr_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mainframe", "serve", "--port", str(self.port)],
            stdout=self._out,
            stderr=self._err,
            env=mainframe_env(database_url, **env),
        )
        self._wait_healthy()

    def _wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.stderr_path.read_text()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError("server did not become healthy")

    def log_events(self) -> list[dict[str, Any]]:
        events = []
        for line in self.stderr_path.read_text().splitlines():
            if line.startswith("{"):
                events.append(json.loads(line))
        return events

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        self._err.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

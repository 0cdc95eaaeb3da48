"""Real `mainframe` processes for end-to-end tests: the CLI, and servers on loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner, Result

from mainframe.cli import app
from tests.polling import wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def mainframe_env(database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
    env.update({"MAINFRAME_DATABASE_URL": database_url, "MAINFRAME_LOG_FORMAT": "json"})
    env["MAINFRAME_STRICT_ROWS"] = "1"  # rows read by name only (tests/conftest.py)
    env["MAINFRAME_DATABASE_DEADLINE_SECONDS"] = os.environ["MAINFRAME_DATABASE_DEADLINE_SECONDS"]
    # Retries are due at once unless a test is about their backoff (it sets its own base).
    env["MAINFRAME_RETRY_BASE_SECONDS"] = "0"
    env.update(extra)
    return env


def cli_run(database_url: str, *args: str, **extra_env: str) -> Result:
    """Run `mainframe ARGS...` in this process (as the installed command would, with its own
    environment); its exit code and output, whatever they are."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("MAINFRAME_")}
    env.update(mainframe_env(database_url, **extra_env))
    # On a thread of its own: the command runs its own event loop, and a test may be inside
    # one (Playwright's synchronous API keeps one running).
    with ThreadPoolExecutor(1) as thread:
        invoke = partial(CliRunner().invoke, prog_name="mainframe")  # as installed
        return thread.submit(invoke, app, list(args), env=env).result()


def cli(database_url: str, *args: str, **extra_env: str) -> str:
    """Run `mainframe ARGS...` in this process and return the last line of stdout (the new
    secret). Provisioning a test's owner, endpoints and tokens this way costs no interpreter
    start per command."""
    done = cli_run(database_url, *args, **extra_env)
    if done.exit_code != 0:
        raise AssertionError(f"mainframe {' '.join(args)} failed: {done.stderr or done.output}")
    return done.stdout.strip().splitlines()[-1]


class ServerProcess:
    """`mainframe serve` on a free loopback port (or the given address and port), with its
    stdout and stderr kept in files. `prefix` runs it through another command that then
    becomes the server itself, such as `ip netns exec NAME`, so the PID stays the server's."""

    def __init__(
        self,
        database_url: str,
        workdir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        prefix: Sequence[str] = (),
        **env: str,
    ) -> None:
        self.port = free_port() if port is None else port
        self.url = f"http://{host}:{self.port}"
        # The address is in the name: servers in separate network namespaces share a port.
        self.stdout_path = workdir / f"server-{host}-{self.port}.out"
        self.stderr_path = workdir / f"server-{host}-{self.port}.err"
        self._out = self.stdout_path.open("w")
        self._err = self.stderr_path.open("w")
        serve = ["serve", "--host", host, "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "mainframe", *serve],
            stdout=self._out,
            stderr=self._err,
            env=mainframe_env(database_url, **env),
        )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()  # never leave a server behind that the test will not stop
            raise

    def _wait_healthy(self, timeout: float = 30.0) -> None:
        def healthy() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.stderr_path.read_text()}")
            try:
                answer = httpx.get(self.url + "/healthz", timeout=1.0, trust_env=False)
            except httpx.HTTPError:
                return False
            return answer.status_code == 200

        try:
            wait_for(healthy, timeout=timeout, what="the server healthy")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {self.tail()}") from None

    def tail(self, lines: int = 20) -> str:
        """The last lines the server wrote to stderr, for a failing test's report."""
        return "\n".join(self.stderr_path.read_text().splitlines()[-lines:])

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

"""The system under test: a fresh database, its credentials made with the CLI, and one or more
`mainframe serve` processes on loopback, each watched for CPU and peak RSS.

Everything here goes through the product's own command line (`mainframe db upgrade`,
`owner create`, `token create`, `serve`, `stats --json`); the only SQL is the PostgreSQL
`CREATE DATABASE` / `DROP DATABASE` that gives every configuration a database of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

from cpucap import CpuCap

# The tests' PgBouncer (tests/pgbouncer.py): Debian's, on a free port, stopped by its PID.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.pgbouncer import PgBouncer

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
# `--pooler prepared`: transaction pooling through PgBouncer 1.24 with max_prepared_statements.
KEEPING = "prepared"
HOST = "127.0.0.1"
ENDPOINT = "bench"
OWNER = "bench-owner"
SOURCE = "bench-source"
# Leases must outlive a run so that no scan is reclaimed mid-measurement.
JOB_TIMEOUT_SECONDS = "900"
RSS_SAMPLE_SECONDS = 0.1
POOL_SIZE = 16  # MAINFRAME_POOL_SIZE's default: each server process's connections
# Every wait in this module is bounded by one of these.
SERVER_START_SECONDS = 120.0
CLI_SECONDS = 300.0
STOP_SECONDS = 15.0
# A database name we are willing to CREATE and DROP.
_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def pool_mode(pooler: str) -> str:
    """PgBouncer's pool_mode for a `--pooler` choice."""
    return "transaction" if pooler == KEEPING else pooler


def server_env(
    database_url: str, pooler: str = "none", settings: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The bench's settings over this environment's (never its MAINFRAME_* variables), then
    `settings` (`--server-env`) on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
    env.update(
        {
            "MAINFRAME_DATABASE_URL": database_url,
            "MAINFRAME_DATABASE_POOLER": pool_mode(pooler),
            "MAINFRAME_DATABASE_POOLER_PREPARES": str(pooler == KEEPING).lower(),
            "MAINFRAME_LOG_FORMAT": "json",
            "MAINFRAME_JOB_TIMEOUT": JOB_TIMEOUT_SECONDS,
            "MAINFRAME_MAX_JOB_ATTEMPTS": "3",
        }
    )
    env.update(settings or {})
    return env


def cli(database_url: str, *args: str) -> str:
    """Run `mainframe ARGS...` against the database; return its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "mainframe", *args],
        capture_output=True,
        text=True,
        env=server_env(database_url),
        timeout=CLI_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"mainframe {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1]


def queued_count(database_url: str) -> int:
    """QUEUED scans, as `mainframe stats --json` reads them from the database."""
    figures = json.loads(last_line(cli(database_url, "stats", "--json")))
    if "queue" not in figures:  # a tree from before stats spoke plain words (--server-src)
        return int(figures['packages_queue{state="queued"}'])
    return int(figures["queue"]["queued"])


@dataclass(frozen=True)
class Credentials:
    workers: tuple[str, ...]  # one worker token per concurrent worker
    sources: tuple[str, ...]  # source tokens that submit the backlog


def make_credentials(database_url: str, *, workers: int, sources: int) -> Credentials:
    """An owner, the endpoint, and the tokens, all made with the CLI."""
    cli(database_url, "owner", "create", OWNER)
    cli(database_url, "endpoint", "create", ENDPOINT, "--owner", OWNER)
    names = [("--worker", f"bench-worker-{i}") for i in range(workers)]
    names += [("--source", f"{SOURCE}-{i}") for i in range(sources)]

    def token(flag_name: tuple[str, str]) -> str:
        flag, name = flag_name
        return last_line(cli(database_url, "token", "create", "--endpoint", ENDPOINT, flag, name))

    with ThreadPoolExecutor(max_workers=4) as pool:
        tokens = list(pool.map(token, names))
    return Credentials(tuple(tokens[:workers]), tuple(tokens[workers:]))


# Databases ----------------------------------------------------------------------------------


def _pg_admin(template: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    statement = sql.SQL(template).format(sql.Identifier(name))
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)


def database_name(tag: str) -> str:
    """A database name of this process's own, safe to CREATE and DROP."""
    name = f"mainframe_bench_{os.getpid()}_{tag}"
    if not _DATABASE_NAME.match(name):
        raise ValueError(f"refusing database name {name!r}")
    return name


def _pg_set(name: str, setting: str, value: str) -> None:
    """`setting` for every later session of database `name` (`--pg-setting`)."""
    import psycopg
    from psycopg import sql

    statement = sql.SQL("ALTER DATABASE {} SET {} = {}").format(
        sql.Identifier(name), sql.Identifier(setting), sql.Literal(value)
    )
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)


@contextlib.contextmanager
def pg_database(tag: str, settings: Mapping[str, str] | None = None) -> Iterator[str]:
    """A new, empty PostgreSQL database beside PG_ADMIN_URL's, with `settings` for its
    sessions; its URL; dropped after."""
    name = database_name(tag)
    _pg_admin("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)
    _pg_admin("CREATE DATABASE {}", name)
    for setting, value in (settings or {}).items():
        _pg_set(name, setting, value)
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        _pg_admin("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)


@contextlib.contextmanager
def fresh_database(
    kind: str, workdir: Path, tag: str, pg_settings: Mapping[str, str] | None = None
) -> Iterator[str]:
    """A migrated, empty database (a SQLite file, or a new PostgreSQL database with
    `pg_settings`); removed after."""
    if kind == "postgresql":
        with pg_database(tag, pg_settings) as url:
            cli(url, "db", "upgrade")
            yield url
        return
    path = workdir / f"{database_name(tag)}.db"
    url = f"sqlite:///{path}"
    try:
        cli(url, "db", "upgrade")
        yield url
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def pg_backends(database_url: str) -> list[psutil.Process]:
    """The PostgreSQL backend processes serving our database (none for SQLite)."""
    if not database_url.startswith("postgresql"):
        return []
    name = database_url.rsplit("/", 1)[-1]
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if cmdline.startswith("postgres:") and f" {name} " in cmdline:
            found.append(proc)
    return found


# Servers ------------------------------------------------------------------------------------


class Server:
    """One `mainframe serve` on loopback (with `--workers N` when N > 1), sampled for RSS."""

    def __init__(
        self,
        database_url: str,
        workdir: Path,
        *,
        workers: int = 1,
        pooler: str = "none",
        settings: Mapping[str, str] | None = None,
        cpu: float | None = None,
    ) -> None:
        self.port = free_port()
        self.cpu = cpu
        # The group first: a quota that cannot be set fails before a process is left behind.
        self.cap = None if cpu is None else CpuCap(cpu, str(self.port))
        self.url = f"http://{HOST}:{self.port}"
        self.workers = workers
        self.log_path = workdir / f"server-{self.port}.log"
        self._log = self.log_path.open("w")
        command = [sys.executable, "-m", "mainframe", "serve", "--host", HOST]
        command += ["--port", str(self.port)]
        if workers > 1:
            command += ["--workers", str(workers)]
        self.proc = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=server_env(database_url, pooler, settings),
        )
        if self.cap is not None:  # its start-up runs uncapped for a moment: not measured
            self.cap.add(self.proc.pid)
        self.ps = psutil.Process(self.proc.pid)
        self.rss_samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._wait_healthy()
        self._sampler.start()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._log.flush()
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(self.url + "/healthz", timeout=2) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError("server did not become healthy")

    def processes(self) -> list[psutil.Process]:
        """The server and, with --workers, its worker processes."""
        with contextlib.suppress(psutil.Error):
            return [self.ps, *self.ps.children(recursive=True)]
        return [self.ps]

    def _sample(self) -> None:
        while not self._stop.wait(RSS_SAMPLE_SECONDS):
            total = 0
            for proc in self.processes():
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
            self.rss_samples.append((time.monotonic(), total))

    def peak_rss(self, since: float, until: float) -> int:
        return max((rss for at, rss in self.rss_samples if since <= at <= until), default=0)

    def counter(self, name: str) -> float:
        """One unlabelled series from /metrics (of whichever process answers)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def stop(self) -> None:
        self._stop.set()
        children = self.processes()[1:]
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_SECONDS)
        for child in children:  # only the processes this server started
            with contextlib.suppress(psutil.Error):
                child.kill()
        if self.cap is not None:
            self.cap.remove()
        self._log.close()


@dataclass
class Stack:
    """What one configuration measures: a database and the servers in front of it."""

    db: str
    database_url: str  # direct, for the CLI's figures and finding PostgreSQL's backends
    servers: list[Server]
    pooler: str = "none"

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(server.url for server in self.servers)

    @property
    def label(self) -> str:
        workers, cpu = self.servers[0].workers, self.servers[0].cpu
        label = f"{len(self.servers)}" + (f"x{workers}w" if workers > 1 else "")
        label += f"/{cpu:g}cpu" if cpu is not None else ""
        return label + (f"@{self.pooler}" if self.pooler != "none" else "")

    def success_total(self) -> float:
        return sum(server.counter("packages_success_total") for server in self.servers)

    def counters_are_exact(self) -> bool:
        """With several processes behind one port, a scrape sees only one process's counters."""
        return all(server.workers == 1 for server in self.servers)


@contextlib.contextmanager
def running(
    db: str,
    database_url: str,
    workdir: Path,
    *,
    count: int,
    workers: int,
    pooler: str = "none",
    settings: Mapping[str, str] | None = None,
    cpu: float | None = None,
) -> Iterator[Stack]:
    """`count` servers on the database (through a PgBouncer of their own unless `pooler` is
    none; with `settings` in their environment; each limited to `cpu` cores unless None),
    stopped afterwards."""
    if workers > 1 and "--workers" not in cli(database_url, "serve", "--help"):
        raise RuntimeError("this `mainframe serve` has no --workers option: drop --server-workers")
    with contextlib.ExitStack() as stack:
        server_url = database_url
        if pooler != "none":
            # As many server connections as the servers' pools would open directly.
            size, keeps = POOL_SIZE * count * workers, pooler == KEEPING
            bouncer = stack.enter_context(
                PgBouncer(pool_mode(pooler), pool_size=size, keeps_prepared=keeps)
            )
            server_url = bouncer.url(database_url.rsplit("/", 1)[1])
            log(f"  PgBouncer ({pooler} pooling) pid {bouncer.proc.pid} on port {bouncer.port}")
        started: list[Server] = []
        try:
            for _ in range(count):
                server = Server(
                    server_url, workdir, workers=workers, pooler=pooler, settings=settings, cpu=cpu
                )
                started.append(server)
                log(f"  server pid {server.proc.pid} on {server.url}")
            yield Stack(db, database_url, started, pooler)
        finally:
            for server in started:
                server.stop()

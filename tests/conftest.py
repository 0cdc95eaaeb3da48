"""Shared fixtures: a fresh database per test on SQLite and on PostgreSQL, and real server
processes on loopback for end-to-end tests."""

from __future__ import annotations

import os

# Rows are read by column name (store/engine/rows.py): every row the suite's store reads
# refuses a position, a slice and iteration, so a positional read fails the test that runs it.
# Set before the store is imported; servers the tests start inherit it (serverproc.py).
os.environ["MAINFRAME_STRICT_ROWS"] = "1"
# A test's database work gets a longer deadline than production's 5 s: two test processes on a
# slow two-core machine can stall a commit for seconds, and a 503 then fails a test about
# something else. Tests of the deadline set their own (tests/faults/test_database_blackhole.py).
os.environ.setdefault("MAINFRAME_DATABASE_DEADLINE_SECONDS", "20")

import ipaddress
import logging
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from mainframe import logs
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.watch.database import create_watch_engine
from mainframe.watch.migrate import upgrade as upgrade_watch

PG_ADMIN_URL = os.environ.get("MAINFRAME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
# Unique per test session, so two sessions on one server never drop each other's template.
PG_TEMPLATE = f"mainframe_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
IN_CI = os.environ.get("CI", "").lower() == "true"
# The databases the store's tests run on: both by default and always in CI; `make check` runs
# SQLite alone for the inner loop (MAINFRAME_TEST_DATABASES=sqlite).
DATABASES = (
    ["sqlite", "postgresql"]
    if IN_CI
    else os.environ.get("MAINFRAME_TEST_DATABASES", "sqlite,postgresql").split(",")
)


# Names this test process may look up: a lookup of any other name would send a DNS query off
# the machine (a hook URL a route walk makes, say). Address literals need no query.
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_system_getaddrinfo = socket.getaddrinfo


def _local_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and not _is_address(name) and name.lower() not in LOCAL_NAMES:
        raise socket.gaierror(socket.EAI_NONAME, f"tests look up loopback names only: {name}")
    return _system_getaddrinfo(host, *args, **kwargs)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return False
    return True


@pytest.fixture(autouse=True, scope="session")
def loopback_names_only() -> Iterator[None]:
    """No test of this process resolves a name beyond loopback (servers started as processes
    get their own guards: hook address policies, namespaces)."""
    socket.getaddrinfo = _local_getaddrinfo
    yield
    socket.getaddrinfo = _system_getaddrinfo


@pytest.fixture(autouse=True)
def logging_as_found() -> Iterator[None]:
    """Each test leaves the process's logging as it found it. A command run in this process
    (`tests/serverproc.py::cli_run`), an app or a watcher built here configures logging for
    the whole process, as the installed command does for its own short life; a command's
    `warning` level left behind would hide every info event from the tests after it, since
    `structlog.testing.capture_logs` swaps the processors and keeps the level."""
    config = structlog.get_config()
    root = logging.getLogger()
    level, ours = root.level, [h for h in root.handlers if h.get_name() == logs.HANDLER_NAME]
    yield
    structlog.configure(**config)
    for handler in root.handlers[:]:
        if handler.get_name() == logs.HANDLER_NAME and handler not in ours:
            root.removeHandler(handler)
    root.setLevel(level)


def _pg_url(database: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{database}"


def _admin_engine():  # type: ignore[no-untyped-def]
    url = PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    return create_engine(url, isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A PostgreSQL database at head, cloned for every test that asks for one."""
    try:
        admin = _admin_engine()
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {PG_TEMPLATE} WITH (FORCE)"))
            conn.execute(text(f"CREATE DATABASE {PG_TEMPLATE}"))
    except OperationalError as exc:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required in CI and is not reachable: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}")
    engine = create_store_engine(_pg_url(PG_TEMPLATE))
    upgrade(engine)
    engine.dispose()
    admin.dispose()
    yield PG_TEMPLATE
    # A fresh engine: the fault tests restart the cluster, which kills pooled connections.
    admin = _admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {PG_TEMPLATE} WITH (FORCE)"))
    admin.dispose()


def fresh_pg_database(template: str | None) -> str:
    name = "mf_" + uuid.uuid4().hex[:16]
    admin = _admin_engine()
    with admin.connect() as conn:
        clause = f" TEMPLATE {template}" if template else ""
        conn.execute(text(f"CREATE DATABASE {name}{clause}"))
    admin.dispose()
    return name


def drop_pg_database(name: str) -> None:
    admin = _admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database at head (cloned from the template), dropped afterwards."""
    name = fresh_pg_database(pg_template)
    yield f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    drop_pg_database(name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at head, migrated once per test run and copied for every test."""
    path = tmp_path_factory.mktemp("template") / "mainframe.db"
    engine = create_store_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()  # the last connection checkpoints the WAL into the file
    return path


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at head: a copy of the migrated SQLite file, or a PostgreSQL database
    cloned from the template."""
    if request.param == "sqlite":
        path = tmp_path / "mainframe.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    template = request.getfixturevalue("pg_template")
    name = fresh_pg_database(template)
    yield _pg_url(name)
    drop_pg_database(name)


@pytest.fixture
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (no schema) of the kind named by the `kind` parameter."""
    kind = getattr(request, "param", "sqlite")
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    request.getfixturevalue("pg_template")  # skips or fails the same way when PG is absent
    name = fresh_pg_database(None)
    yield _pg_url(name)
    drop_pg_database(name)


@pytest.fixture(scope="session")
def watch_pg_template(pg_template: str) -> Iterator[str]:
    """A PostgreSQL database holding only the watcher's tables, at the watcher's head.
    (It asks for `pg_template` to skip or fail the same way when PostgreSQL is absent.)"""
    name = fresh_pg_database(None)
    engine = create_watch_engine(_pg_url(name))
    upgrade_watch(engine)
    engine.dispose()
    yield name
    drop_pg_database(name)


@pytest.fixture(params=DATABASES)
def watch_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A watcher's database at the watcher's head (its own chain, not the server's)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'watch.db'}"
        engine = create_watch_engine(url)
        upgrade_watch(engine)
        engine.dispose()
        yield url
        return
    name = fresh_pg_database(request.getfixturevalue("watch_pg_template"))
    yield _pg_url(name)
    drop_pg_database(name)

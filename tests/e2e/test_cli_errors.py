"""The CLI's database failures, each one line on stderr naming what went wrong and the URL it
tried (password removed), and a non-zero exit; a traceback only with `--debug`. The read-only
host is in tests/faults/test_failover.py, beside the standby it needs."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from mainframe.cli import app
from tests.conftest import drop_pg_database, fresh_pg_database
from tests.pgbouncer import PgBouncer
from tests.serverproc import free_port, mainframe_env


def run(url: str, *args: str, **env: str) -> tuple[int, str, str]:
    given: dict[str, str | None] = dict(mainframe_env(url, **env))
    done = CliRunner().invoke(app, list(args), env=given)
    return done.exit_code, done.stdout, done.stderr


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def pg_database(pg_template: str) -> Iterator[str]:
    name = fresh_pg_database(pg_template)
    yield name
    drop_pg_database(name)


def test_an_unreachable_database_is_one_line_without_the_password() -> None:
    url = f"postgresql://postgres:hunter2@127.0.0.1:{free_port()}/mf"
    code, out, err = run(url, "stats")
    line = one_line(err)
    assert code == 1 and out == ""
    assert line.startswith("mainframe: the database cannot be reached: ")
    assert line.endswith(f"(postgresql://postgres@127.0.0.1:{url.rsplit(':', 1)[1]})")
    assert "hunter2" not in err


def test_every_host_of_a_multi_host_url_down_is_one_line() -> None:
    a, b = free_port(), free_port()
    url = f"postgresql://postgres@127.0.0.1:{a},127.0.0.1:{b}/mf?target_session_attrs=read-write"
    code, _, err = run(url, "db", "upgrade")
    assert code == 1
    assert one_line(err).endswith(f"({url})"), err


def test_debug_adds_the_traceback() -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/mf"
    code, _, err = run(url, "--debug", "stats")
    assert code == 1 and "Traceback (most recent call last)" in err
    assert err.rstrip().splitlines()[-1].startswith("mainframe: the database cannot be reached")


def test_a_schema_older_than_the_release_names_the_upgrade(pg_template: str) -> None:
    name = fresh_pg_database(None)  # an empty database: no schema at all
    try:
        url = f"postgresql://postgres@127.0.0.1:5432/{name}"
        code, _, err = run(url, "dead", "list", "--owner", "ops")
        assert code == 1
        assert one_line(err) == (
            "mainframe: the database's schema (revision none) is older than this release "
            f"(revision {_head()}); run `mainframe db upgrade` first ({url})"
        )
    finally:
        drop_pg_database(name)


def test_a_schema_newer_than_the_release_is_left_alone(pg_database: str) -> None:
    url = f"postgresql://postgres@127.0.0.1:5432/{pg_database}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    for command in (("stats",), ("db", "upgrade")):
        code, _, err = run(url, *command)
        assert code == 1
        line = one_line(err)
        assert "schema (revision 9999) is newer than this release" in line, line


def test_a_newer_sqlite_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "mainframe.db"
    url = f"sqlite:///{path}"
    assert run(url, "db", "upgrade")[0] == 0
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    code, _, err = run(url, "stats")
    assert code == 1
    assert "is newer than this release" in one_line(err) and url in err


def test_a_pooler_that_refuses_the_startup_parameters_is_named(pg_database: str) -> None:
    with PgBouncer("transaction") as pooler:
        url = pooler.url(pg_database)
        code, _, err = run(url, "token", "list", "--endpoint", "e")
        assert code == 1
        assert one_line(err) == (
            "mainframe: a pooler refused the connection (unsupported startup parameter: jit); "
            "set MAINFRAME_DATABASE_POOLER=transaction or session for PgBouncer "
            f"(docs/scale-out.md) ({url})"
        )
        code, _, err = run(url, "stats", MAINFRAME_DATABASE_POOLER="transaction")
        assert code == 0, err


def _head() -> str:
    from mainframe.store.engine.migrate import head_revision

    found = head_revision()
    assert found is not None
    return found

"""`mainframe owner token` and the `--owner` default, run as an operator runs them: a lost
owner token is replaced (the old one stops working, audited), and a command that acts for an
owner takes the only one there is, MAINFRAME_OWNER, or says in one line to name one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mainframe.store import Budget, Store, open_database
from tests.blocking import Blocking, portal
from tests.serverproc import cli, cli_run


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    assert cli_run(url, "db", "upgrade").exit_code == 0
    return url


@pytest.fixture
def store(url: str) -> Iterator[Blocking]:
    with portal() as loop:
        built = Store.build(open_database(url), Budget.of(job_timeout=30, max_attempts=1))
        blocking = Blocking(built, loop)
        yield blocking
        blocking.close()


def test_owner_token_replaces_the_token_and_revokes_the_old_one(url: str, store: Blocking) -> None:
    old = cli(url, "owner", "create", "alice")
    done = cli_run(url, "owner", "token", "alice")
    assert done.exit_code == 0, done.stderr
    new = done.stdout.strip().splitlines()[-1]
    assert new.startswith("mfo_") and new != old
    assert "1 old token revoked" in done.stdout
    assert store.authentication.authenticate(old) is None
    found = store.authentication.authenticate(new)
    assert found is not None and found.role == "owner" and found.name == "alice"
    alice = store.owners.owner_id("alice")
    [entry] = store.audit.entries(alice, before_id=None, limit=10)
    assert (entry.action, entry.origin, entry.count) == ("owner_token_rotated", "cli", 1)


def test_owner_token_for_nobody_is_one_line(url: str) -> None:
    done = cli_run(url, "owner", "token", "nobody")
    assert done.exit_code == 1  # not there: refused, as any unknown name is
    assert done.stderr == "mainframe: no owner named 'nobody'\n" and done.stdout == ""


def test_the_only_owner_is_the_default(url: str) -> None:
    cli(url, "owner", "create", "alice")
    done = cli_run(url, "endpoint", "create", "pypi")
    assert done.exit_code == 0, done.stderr
    assert "endpoint 'pypi' created for owner 'alice'" in done.stdout
    listed = cli_run(url, "dead", "list")
    assert listed.exit_code == 0, listed.stderr


def test_several_owners_need_one_named(url: str) -> None:
    cli(url, "owner", "create", "alice")
    cli(url, "owner", "create", "bob")
    done = cli_run(url, "endpoint", "create", "pypi")
    assert done.exit_code == 2
    assert done.stderr == (
        "mainframe: several owners: name one with --owner NAME or MAINFRAME_OWNER\n"
    )
    assert cli_run(url, "dead", "list").stderr == done.stderr
    by_env = cli_run(url, "endpoint", "create", "pypi", MAINFRAME_OWNER="bob")
    assert "created for owner 'bob'" in by_env.stdout
    by_flag = cli_run(url, "endpoint", "create", "npm", "--owner", "alice")
    assert "created for owner 'alice'" in by_flag.stdout

"""A PostgreSQL primary and its synchronous standby for fault tests: two clusters of their own
(`pg_createcluster`, `pg_basebackup`) on free ports, never the main cluster, dropped after.
The primary waits for the standby to flush every commit (`synchronous_standby_names`), so a
commit the server acknowledged is on the standby when the primary dies."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.polling import wait_for
from tests.serverproc import free_port

HBA = (
    "local all all trust\n"
    "host all all 127.0.0.1/32 trust\n"
    "local replication all trust\n"
    "host replication all 127.0.0.1/32 trust\n"
)
STANDBY_NAME = "mf_standby"


def _version() -> str:
    versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
    usable = versions and shutil.which("pg_createcluster") and os.geteuid() == 0
    if not usable:
        if IN_CI:
            pytest.fail("the standby tests need pg_createcluster and root in CI")
        pytest.skip("needs pg_createcluster and root to make a primary and a standby")
    return versions[-1]


def _run(*command: str, timeout: float = 120) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed: {done.stdout} {done.stderr}")


def _as_postgres(*command: str) -> None:
    _run("runuser", "-u", "postgres", "--", *command)


class Cluster:
    """One cluster of its own, made with Debian's tools."""

    def __init__(self, version: str, name: str, port: int) -> None:
        self.version, self.name, self.port = version, name, port
        self.conf = Path(f"/etc/postgresql/{version}/{name}")
        self.data = Path(f"/var/lib/postgresql/{version}/{name}")

    def create(self, **settings: str) -> None:
        _run("pg_createcluster", self.version, self.name, "-p", str(self.port))
        (self.conf / "pg_hba.conf").write_text(HBA)
        # Debian's postgresql.conf reads conf.d; values quoted as the file format wants.
        lines = [f"{name} = '{value}'" for name, value in settings.items()]
        (self.conf / "conf.d" / "mainframe-test.conf").write_text("\n".join(lines) + "\n")

    def ctl(self, action: str, *args: str) -> None:
        _run("pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, action, *args)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def wait_ready(self, timeout: float = 60.0) -> None:
        command = ["pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-q"]
        wait_for(
            lambda: subprocess.run(command, check=False).returncode == 0,
            timeout=timeout,
            what=f"cluster {self.name} up",
            every=0.1,
        )

    def psql(self, sql: str, database: str = "postgres") -> str:
        done = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
             "-tAc", sql],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    def drop(self) -> None:
        subprocess.run(
            ["pg_dropcluster", "--stop", self.version, self.name],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        # pg_dropcluster leaves conf.d behind while a file it did not write is in it.
        shutil.rmtree(self.conf, ignore_errors=True)
        left = [str(path) for path in (self.conf, self.data) if path.exists()]
        assert not left, f"cluster {self.name} left {left} behind"


class Pair:
    """A primary and a synchronous standby streaming from it, both running."""

    def __init__(self) -> None:
        version = _version()
        suffix = uuid.uuid4().hex[:8]
        self.primary = Cluster(version, f"mfp_{suffix}", free_port())
        self.standby = Cluster(version, f"mfs_{suffix}", free_port())
        try:
            self._build()
        except BaseException:
            self.drop()
            raise

    def _build(self) -> None:
        self.primary.create(
            listen_addresses="127.0.0.1",
            synchronous_standby_names=STANDBY_NAME,
            synchronous_commit="on",
            fsync="off",  # a test cluster: durability across a machine crash is not tested
        )
        self.primary.ctl("start")
        self.primary.wait_ready()
        self.standby.create(listen_addresses="127.0.0.1", hot_standby="on", fsync="off")
        for child in self.standby.data.iterdir():  # the directory stays, owned by postgres
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        conninfo = (
            f"host=127.0.0.1 port={self.primary.port} user=postgres application_name={STANDBY_NAME}"
        )
        _as_postgres(
            "pg_basebackup", "-d", conninfo, "-D", str(self.standby.data), "-R", "-X", "stream"
        )
        self.standby.ctl("start")
        self.standby.wait_ready()
        self.wait_streaming()

    def wait_streaming(self, timeout: float = 60.0) -> None:
        state = (
            f"SELECT sync_state FROM pg_stat_replication WHERE application_name = '{STANDBY_NAME}'"
        )
        wait_for(
            lambda: self.primary.psql(state) == "sync",
            timeout=timeout,
            what="the standby synchronous",
            every=0.1,
        )

    def url(self, database: str) -> str:
        """Both hosts, as libpq names a primary and its standby; writes go to the primary."""
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            f"/{database}?target_session_attrs=read-write"
        )

    def fail_over(self) -> float:
        """Stop the primary at once (no checkpoint, like a crash) and promote the standby;
        return the monotonic time the promotion finished."""
        self.primary.ctl("stop", "-m", "immediate")
        self.standby.ctl("promote")
        promoted = time.monotonic()
        wait_for(
            lambda: self.standby.psql("SELECT pg_is_in_recovery()") == "f",
            timeout=60,
            what="the standby out of recovery",
        )
        return promoted

    def drop(self) -> None:
        self.standby.drop()
        self.primary.drop()

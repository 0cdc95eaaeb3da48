"""A real PgBouncer (Debian's) in front of the test PostgreSQL, in session or transaction
pooling, with nothing set on its side beyond `ignore_startup_parameters = extra_float_digits`
(the usual setting): the test's own process, on a free loopback port, stopped by its PID.
`keeps_prepared` runs PgBouncer 1.24 instead (built by `.ci/pgbouncer-newer`) with
`max_prepared_statements` set, as a pooler that keeps prepared statements is run."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import IN_CI, PG_ADMIN_URL
from tests.polling import wait_for
from tests.serverproc import free_port

# PgBouncer refuses to run as root; Debian's PostgreSQL user runs it then.
RUN_AS = "postgres"
# A PgBouncer that keeps prepared statements in transaction pooling (1.21 and later).
NEWER = Path("/opt/pgbouncer-1.24.1/bin/pgbouncer")
MAX_PREPARED = 200


def _target() -> tuple[str, int]:
    host_port = PG_ADMIN_URL.split("@", 1)[1].split("/", 1)[0]
    host, _, port = host_port.partition(":")
    return host, int(port or 5432)


def _binary(keeps_prepared: bool) -> str:
    """Debian's PgBouncer, or the newer one; a skip where it is missing (a failure in CI)."""
    if keeps_prepared:
        found, how = str(NEWER), "bash .ci/pgbouncer-newer"
    else:
        found, how = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer", "apt-get install pgbouncer"
    if not os.path.exists(found):
        if IN_CI:
            pytest.fail(f"{found} is required in CI ({how})")
        pytest.skip(f"{found} is not installed ({how})")
    return found


def functions_made(url: str) -> dict[str, int]:
    """The statements made server-side functions in the database (transaction pooling,
    store/engine/pg_functions.py), with how many of each."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        names = conn.execute(text("SELECT proname FROM pg_proc WHERE proname LIKE 'mf_q_%'"))
        found = Counter(name.removeprefix("mf_q_").rpartition("_")[0] for (name,) in names)
    engine.dispose()
    return dict(found)


class PgBouncer:
    """`pgbouncer` in `mode` pooling in front of the test cluster; `url(db)` reaches `db`."""

    def __init__(self, mode: str, *, pool_size: int = 10, keeps_prepared: bool = False) -> None:
        binary = _binary(keeps_prepared)
        self.port = free_port()
        # Its own directory: pytest's are private to root, where PgBouncer runs as postgres.
        self.dir = Path(tempfile.mkdtemp(prefix=f"mf-pgbouncer-{mode}-"))
        host, port = _target()
        (self.dir / "users.txt").write_text('"postgres" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.dir / 'users.txt'}\n"
            f"pool_mode = {mode}\ndefault_pool_size = {pool_size}\nmax_client_conn = 500\n"
            "ignore_startup_parameters = extra_float_digits\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\n"
            + (f"max_prepared_statements = {MAX_PREPARED}\n" if keeps_prepared else "")
        )
        command = [binary, str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:
            uid = pwd.getpwnam(RUN_AS).pw_uid
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, uid, -1)
            command = ["runuser", "-u", RUN_AS, "--", *command]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait_listening()

    def _wait_listening(self, timeout: float = 10.0) -> None:
        def listening() -> bool:
            if self.proc.poll() is not None:
                said = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise AssertionError(f"pgbouncer exited: {said} {self.log()}")
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        try:
            wait_for(listening, timeout=timeout, what="pgbouncer listening")
        except AssertionError:
            self.stop()
            raise

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        # runuser stays the parent of pgbouncer and passes the signal on.
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

"""A real Alertmanager on a free loopback port, for the tests whose alerts must land in one."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.polling import wait_for
from tests.serverproc import free_port
from tests.tools import required_binary

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"


@contextmanager
def running_alertmanager(tmp_path: Path) -> Iterator[str]:
    """Alertmanager with a receiver that drops everything, until the block ends."""
    binary = required_binary(
        "prometheus-alertmanager", package="prometheus-alertmanager", path=ALERTMANAGER
    )
    config = tmp_path / "alertmanager.yml"
    config.write_text('route: {receiver: "null"}\nreceivers: [{name: "null"}]\n')
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(url), timeout=20, what="alertmanager ready", every=0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/-/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def active(alertmanager: str) -> set[str]:
    """The names of the alerts Alertmanager holds active now."""
    alerts = httpx.get(alertmanager + "/api/v2/alerts", params={"active": "true"}).json()
    return {a["labels"]["alertname"] for a in alerts if a["status"]["state"] == "active"}

"""The README's "A first fleet, step by step", run verbatim: every shell block of that
section, in order, in one bash with `set -e`, in a fresh directory beside a real server on a
free loopback port (the test's stand-in for `make serve`, with retries due at once so the dead
letter comes quickly). Every command must succeed, and the fleet must end as the README says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.serverproc import ServerProcess

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## A first fleet, step by step"


def walkthrough() -> str:
    """The shell blocks of the README's walkthrough, joined in order."""
    text = README.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = re.findall(r"^```sh\n(.*?)^```$", text[start:end], re.MULTILINE | re.DOTALL)
    assert len(blocks) >= 2, "the walkthrough's shell blocks"
    return "\n".join(blocks)


def test_the_first_fleet_runs_as_written(tmp_path: Path) -> None:
    script = walkthrough()
    assert "mainframe dead redrive" in script and "exit 1" in script
    # `source .venv/bin/activate` as in a clone: the venv these tests run in.
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    database = f"sqlite:///{tmp_path / 'mainframe.db'}"
    with ServerProcess(database, tmp_path) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MAINFRAME_", "VIRTUAL"))}
        env["MAINFRAME_URL"] = server.url  # where `make serve` would be: 127.0.0.1:8000
        done = subprocess.run(
            ["bash", "-e", "-u", "-o", "pipefail", "-c", script],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        admin = server.stdout_path.read_text().splitlines()[-1]
        scans = httpx.get(
            f"{server.url}/api/v1/scans", params={"endpoint": "pypi-malware", "limit": 10},
            headers={"Authorization": f"Bearer {admin}"}, trust_env=False,
        ).json()["scans"]  # fmt: skip
    out = done.stdout
    assert "2 lines: 2 \u00d7 201" in out and "1 line: 1 \u00d7 201" in out
    # Each worker's last line: the scans it worked on, the attempts, and where they ended.
    assert "2 scans in 2 attempts: 2 finished\n" in out
    assert "1 scan in 3 attempts: 1 dead letter\n" in out
    assert "1 scan in 1 attempt: 1 finished\n" in out
    # The dead letter, listed with its reason and last error, then redriven and finished.
    [row] = [line for line in out.splitlines() if "\tbroken\t" in line]
    assert "\tattempts exhausted\t" in row and row.endswith("\tno archive found")
    assert "redriven 1, skipped 0" in out
    by_name = {scan["name"]: scan for scan in scans}
    assert {name: scan["status"] for name, scan in by_name.items()} == dict.fromkeys(
        ("requests", "left-pad", "broken"), "FINISHED"
    )
    assert by_name["broken"]["dead_lettered_at"] is None
    # The worker said so when its result dead-lettered the scan.
    assert '"event": "scan_dead_lettered"' in done.stderr
    # The last `mainframe stats`: three finished, none dead.
    finished = [line for line in out.splitlines() if line.startswith("finished ")]
    assert finished[-1].split()[1] == "3"

"""A share of the machine's CPU for one server process, as a host of its own would give it.

With `--server-cpu CORES` each server runs in a cgroup of its own whose CPU quota is CORES of
the machine's cores (cgroup v2's `cpu.max`, or v1's CFS quota where only v1's `cpu`
controller is mounted). Three capped processes then have three times one's CPU, as three
hosts would, instead of sharing the two cores the bench, PostgreSQL and PgBouncer share.
Needs root.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

V2_ROOT = Path("/sys/fs/cgroup")
V1_CPU = Path("/sys/fs/cgroup/cpu")
# A short period spreads the quota over the second: with the kernel's 100 ms a capped
# process would run flat out and then stall for most of a period, which a host never does.
PERIOD_US = 10_000
REMOVE_TRIES = 50
REMOVE_PAUSE_SECONDS = 0.05


def _root() -> tuple[Path, bool]:
    """Where the groups go, and whether it is cgroup v2."""
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return V2_ROOT, True
    if (V1_CPU / "cpu.cfs_quota_us").exists():
        return V1_CPU, False
    raise SystemExit("--server-cpu needs cgroup v2's cpu controller or v1's cpu mount")


def check(cores: float) -> None:
    """Fail early (before any database is made) when no cap can be set."""
    if cores <= 0:
        raise SystemExit("--server-cpu takes a positive number of cores")
    if os.geteuid() != 0:
        raise SystemExit("--server-cpu needs root (it writes the cgroup tree)")
    _root()


class CpuCap:
    """One cgroup limited to `cores` cores; `add` moves a process (and its future children)
    into it; `remove` deletes it once its processes have exited."""

    def __init__(self, cores: float, name: str) -> None:
        root, v2 = _root()
        self.path = root / f"mainframe-bench-{name}"
        self.path.mkdir(exist_ok=True)
        quota = max(1_000, round(cores * PERIOD_US))
        if v2:
            with contextlib.suppress(OSError):  # already on where the tree has it on
                (root / "cgroup.subtree_control").write_text("+cpu")
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        for _ in range(REMOVE_TRIES):  # bounded: exited processes leave the group shortly
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(REMOVE_PAUSE_SECONDS)

"""One measurement: spawn the load processes for a plan, account the window's CPU per group
(servers, load clients, PostgreSQL backends, this script, everything else), peak server RSS,
and optionally record the servers with py-spy.

CPU figures are percentages of one core over the window (200 % is all of a 2-core machine).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path

import psutil

import dbwork
from load import EXTRA_SECONDS, LoadPlan, LoadStats, load_process
from servers import Stack, log, pg_backends

# Time for the spawned interpreters to import aiohttp before the clock starts.
SPAWN_SECONDS = 2.0
# CPU (in cores) that processes outside the benchmark may use before a run starts anyway.
QUIET_CORES = 0.15
PROFILE_RATE_HZ = "100"


@dataclass
class Window:
    """What one measurement saw."""

    stats: LoadStats
    seconds: float
    cpu: dict[str, float]  # servers, clients, pg, bench, other: % of one core
    peak_rss: int  # of all the servers together, bytes
    success_delta: float  # change in the servers' packages_success_total
    db: dbwork.DbWork | None = None  # what PostgreSQL wrote in the window (None: SQLite)
    # The machine's context switches in the window, every process's: what a process more than
    # the cores costs in wake-ups (docs/performance.md, *Three processes on two cores*).
    switches_per_s: float = 0.0


def split(
    kind: str,
    stack: Stack,
    *,
    procs: int,
    concurrency: int,
    tokens: tuple[str, ...] = (),
    batch: int = 1,
    count: int = 0,
    label: str = "s",
    warmup: float = 0.0,
    duration: float = 0.0,
    limit: float = 0.0,
    fetch: bool = False,
) -> list[LoadPlan]:
    """One plan per load process: concurrency, count and tokens shared out between them.

    Timed plans (count 0) warm up for `warmup` then measure `duration` seconds; counted
    plans start at once and give up after `limit` seconds. `fetch` (complete-and-fetch)
    is for timed loops: a drain counts its leases by polls."""
    if fetch and count:
        raise ValueError("complete-and-fetch runs timed loops only")
    procs = max(1, min(procs, concurrency))
    start = time.monotonic() + SPAWN_SECONDS
    measure_from = start + (warmup if count == 0 else 0.0)
    until = measure_from + duration if count == 0 else measure_from + limit
    plans = []
    for i in range(procs):
        share = concurrency // procs + (i < concurrency % procs)
        plans.append(
            LoadPlan(
                kind=kind,
                urls=stack.urls,
                tokens=tokens[i::procs] or tokens,
                concurrency=share,
                measure_from=measure_from,
                measure_until=until,
                deadline=until,
                batch=batch,
                count=count // procs + (i < count % procs) if count else 0,
                label=label,
                proc=i,
                offset=i,
                fetch=fetch,
            )
        )
    return plans


def cpu_seconds(procs: list[psutil.Process]) -> dict[int, float]:
    seconds = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            seconds[proc.pid] = float(times.user + times.system)
    return seconds


def delta(before: dict[int, float], after: dict[int, float]) -> float:
    # A process first seen at the end (a new PostgreSQL backend) ran inside the window.
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def machine_busy_seconds() -> float:
    times = psutil.cpu_times()._asdict()
    # guest time is already inside user; steal and iowait are not this machine's work.
    idle = ("idle", "iowait", "steal", "guest", "guest_nice")
    return float(sum(v for k, v in times.items() if k not in idle))


def server_processes(stack: Stack) -> list[psutil.Process]:
    return [proc for server in stack.servers for proc in server.processes()]


def wait_for_quiet(stack: Stack, limit: float) -> float:
    """Wait (at most `limit` s) until processes outside the benchmark use < QUIET_CORES;
    return the foreign load last seen, in cores."""
    deadline = time.monotonic() + limit
    while True:
        ours = [*server_processes(stack), psutil.Process(), *pg_backends(stack.database_url)]
        busy, mine = machine_busy_seconds(), cpu_seconds(ours)
        time.sleep(1.0)
        foreign = machine_busy_seconds() - busy - delta(mine, cpu_seconds(ours))
        if foreign < QUIET_CORES or time.monotonic() >= deadline:
            if foreign >= QUIET_CORES:
                log(f"  measuring anyway: {foreign:.2f} cores busy outside the benchmark")
            return foreign
        log(f"  waiting for a quiet machine: {foreign:.2f} cores busy outside the benchmark")


def py_spy() -> str:
    """The py-spy next to this interpreter, or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    return found


def start_profilers(stack: Stack, out: Path | None) -> list[subprocess.Popen[bytes]]:
    """py-spy on every server (collapsed stacks in OUT-srvN.txt) until stop_profilers."""
    if out is None:
        return []
    out.parent.mkdir(parents=True, exist_ok=True)
    profilers = []
    for index, server in enumerate(stack.servers):
        command = [py_spy(), "record", "--nonblocking", "--format", "raw", "-r", PROFILE_RATE_HZ]
        command += ["-o", f"{out}-srv{index}.txt", "--pid", str(server.proc.pid)]
        if server.workers > 1:
            command.append("--subprocesses")
        profilers.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    return profilers


def stop_profilers(profilers: list[subprocess.Popen[bytes]]) -> None:
    for profiler in profilers:
        profiler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    for profiler in profilers:
        try:
            profiler.wait(timeout=EXTRA_SECONDS)
        except subprocess.TimeoutExpired:
            profiler.kill()
            profiler.wait(timeout=EXTRA_SECONDS)


def run(stack: Stack, plans: list[LoadPlan], *, profile: Path | None = None) -> Window:
    """Run the plans' load processes; account the window [measure_from, end)."""
    ctx = mp.get_context("spawn")
    procs, pipes = [], []
    for plan in plans:
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=load_process, args=(plan, send), daemon=True)
        proc.start()
        procs.append(proc)
        pipes.append(receive)
    first = plans[0]
    timed = first.count == 0
    success_before = stack.success_total()
    time.sleep(max(0.0, first.measure_from - time.monotonic()))
    groups = {
        "clients": [psutil.Process(proc.pid) for proc in procs],
        "servers": server_processes(stack),
        "bench": [psutil.Process()],
        "pg": pg_backends(stack.database_url),
    }
    before = {k: cpu_seconds(v) for k, v in groups.items()}, machine_busy_seconds()
    switches_before = psutil.cpu_stats().ctx_switches
    written_before = dbwork.reading(stack.database_url)
    began = time.monotonic()
    profilers = start_profilers(stack, profile)
    if timed:
        time.sleep(max(0.0, first.measure_until - time.monotonic()))
    else:
        _wait_all(pipes, first.deadline + EXTRA_SECONDS)
    groups["pg"] = pg_backends(stack.database_url)
    groups["servers"] = server_processes(stack)
    after = {k: cpu_seconds(v) for k, v in groups.items()}, machine_busy_seconds()
    switches = psutil.cpu_stats().ctx_switches - switches_before
    ended = time.monotonic()
    if not timed:
        # The load has stopped: let every backend report its counts (dbwork.py). A timed
        # window's two readings lag alike, so the second is read at once.
        time.sleep(dbwork.REPORT_SECONDS)
    written_after = dbwork.reading(stack.database_url)
    stop_profilers(profilers)
    stats = LoadStats()
    for pipe in pipes:
        stats.merge(_receive(pipe, first.deadline))
    for proc in procs:
        proc.join(timeout=EXTRA_SECONDS)
    # Rates divide by the window; a counted plan's window ends with its last response.
    seconds = first.measure_until - first.measure_from
    if not timed:
        seconds = max(stats.last_done, first.measure_from + 1e-3) - first.measure_from
    span = max(ended - began, 1e-3)
    cpu = {k: 100 * delta(before[0][k], after[0][k]) / span for k in groups}
    cpu["other"] = 100 * (after[1] - before[1]) / span - sum(cpu.values())
    return Window(
        stats=stats,
        seconds=seconds,
        cpu=cpu,
        peak_rss=sum(s.peak_rss(first.measure_from, ended) for s in stack.servers),
        success_delta=stack.success_total() - success_before,
        db=written_after - written_before if written_after and written_before else None,
        switches_per_s=switches / span,
    )


def _wait_all(pipes: list[Connection], until: float) -> None:
    pending = list(pipes)
    while pending and (left := until - time.monotonic()) > 0:
        for ready in wait(pending, timeout=left):
            pending.remove(ready)  # type: ignore[arg-type]


def _receive(pipe: Connection, deadline: float) -> LoadStats:
    if not pipe.poll(max(1.0, deadline - time.monotonic() + EXTRA_SECONDS)):
        raise RuntimeError("a load process did not report back")
    raw = pipe.recv()
    return replace(LoadStats(), **raw)

"""Throughput benchmark: drives a real `mainframe serve` over HTTP with W concurrent workers.

For each database (SQLite file, fresh PostgreSQL database) and table size it migrates, seeds
through `mainframe.store.bulk`, starts one server, creates worker tokens with the CLI and runs
aiohttp workers that lease and report `finished` as fast as they can. It prints scans/s,
client-side job-poll latency p50/p99, the server's peak RSS and CPU, and the load client's
own CPU, so a saturated client is visible instead of being measured as the server.

    python bench/bench.py --db both --duration 15 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from mainframe.store import bulk
from mainframe.store.engine import create_store_engine

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
HOST = "127.0.0.1"
ENDPOINT = "bench"
OWNER = "bench-owner"
# Leases must outlive a run so no scan is reclaimed mid-measurement.
JOB_TIMEOUT_SECONDS = "900"
RSS_SAMPLE_SECONDS = 0.1
# CPU (in cores) that processes outside the benchmark may use before a run starts anyway.
QUIET_CORES = 0.15
MIB = 1024 * 1024
# Every wait in this script is bounded by one of these.
SERVER_START_SECONDS = 120.0
CLI_SECONDS = 120.0
EXTRA_RUN_SECONDS = 60.0


# Load generator (runs in child processes) ---------------------------------------------------


@dataclass
class LoadStats:
    """What one load process saw; times are seconds, latencies milliseconds."""

    accepted_in_window: int = 0
    accepted_total: int = 0
    leased_total: int = 0
    rejected: int = 0
    http_errors: int = 0
    empty_polls: int = 0
    poll_ms: list[float] = field(default_factory=list)
    result_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class LoadPlan:
    url: str
    tokens: list[str]
    workers: int
    batch: int
    measure_from: float  # time.monotonic(): system-wide on Linux, shared by the processes
    measure_until: float


def load_process(plan: LoadPlan, out: Any) -> None:
    """Entry point of one load-generator process: run its workers, send back LoadStats."""
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    stats = asyncio.run(_drive(plan))
    out.send(asdict(stats))
    out.close()


async def _drive(plan: LoadPlan) -> LoadStats:
    import aiohttp

    stats = LoadStats()
    connector = aiohttp.TCPConnector(limit=max(plan.workers, 1) * 2, keepalive_timeout=120)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(
        plan.url, connector=connector, timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()
    ) as session:
        workers = [
            _worker(session, plan, plan.tokens[i % len(plan.tokens)], stats)
            for i in range(plan.workers)
        ]
        budget = plan.measure_until - time.monotonic() + EXTRA_RUN_SECONDS
        await asyncio.wait_for(asyncio.gather(*workers), timeout=budget)
    return stats


async def _worker(session: Any, plan: LoadPlan, token: str, stats: LoadStats) -> None:
    import orjson

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    lease_path = f"/api/v1/jobs?batch={plan.batch}"
    while (started := time.monotonic()) < plan.measure_until:
        async with session.post(lease_path, headers=headers) as response:
            body = await response.read()
            status = response.status
        polled = time.monotonic()
        if started >= plan.measure_from:
            stats.poll_ms.append((polled - started) * 1000)
        if status != 200:
            stats.http_errors += 1
            await asyncio.sleep(0.05)
            continue
        jobs = orjson.loads(body)
        if not jobs:
            stats.empty_polls += 1
            await asyncio.sleep(0.01)
            continue
        stats.leased_total += len(jobs)
        if plan.batch == 1:
            for job in jobs:
                await _report_one(session, headers, job, plan, stats)
        else:
            await _report_batch(session, headers, jobs, plan, stats)


def _result_body(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "outcome": "finished",
        "attempt": job["attempt"],
        "assignment_id": job["assignment_id"],
        "summary": "clean",
        "result": {"verdict": "clean"},
    }


def _count(stats: LoadStats, plan: LoadPlan, accepted: int, rejected: int, started: float) -> None:
    done = time.monotonic()
    stats.accepted_total += accepted
    stats.rejected += rejected
    if plan.measure_from <= done < plan.measure_until:
        stats.accepted_in_window += accepted
    if started >= plan.measure_from:
        stats.result_ms.append((done - started) * 1000)


async def _report_one(
    session: Any, headers: dict[str, str], job: dict[str, Any], plan: LoadPlan, stats: LoadStats
) -> None:
    import orjson

    started = time.monotonic()
    path = f"/api/v1/jobs/{job['scan_id']}/result"
    async with session.post(
        path, data=orjson.dumps(_result_body(job)), headers=headers
    ) as response:
        await response.read()
        ok = response.status == 200
    _count(stats, plan, int(ok), int(not ok), started)


async def _report_batch(
    session: Any,
    headers: dict[str, str],
    jobs: list[dict[str, Any]],
    plan: LoadPlan,
    stats: LoadStats,
) -> None:
    import orjson

    started = time.monotonic()
    body = {"results": [{"scan_id": job["scan_id"], **_result_body(job)} for job in jobs]}
    async with session.post(
        "/api/v1/jobs/results", data=orjson.dumps(body), headers=headers
    ) as response:
        raw = await response.read()
        status = response.status
    if status != 200:
        stats.http_errors += 1
        _count(stats, plan, 0, len(jobs), started)
        return
    items = orjson.loads(raw)["results"]
    accepted = sum(1 for item in items if item["status"] == 200)
    _count(stats, plan, accepted, len(items) - accepted, started)


# The server under test ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def server_env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAINFRAME_")}
    env.update(
        {
            "MAINFRAME_DATABASE_URL": database_url,
            "MAINFRAME_LOG_FORMAT": "json",
            "MAINFRAME_JOB_TIMEOUT": JOB_TIMEOUT_SECONDS,
            "MAINFRAME_MAX_JOB_ATTEMPTS": "3",
        }
    )
    return env


def cli(database_url: str, *args: str) -> str:
    """Run `mainframe ARGS...`; return the last stdout line (the new secret)."""
    done = subprocess.run(
        [sys.executable, "-m", "mainframe", *args],
        capture_output=True,
        text=True,
        env=server_env(database_url),
        timeout=CLI_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"mainframe {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


class Server:
    """One `mainframe serve` subprocess on loopback, with an RSS sampler thread."""

    def __init__(self, database_url: str, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log_path = workdir / f"server-{self.port}.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mainframe", "serve", "--host", HOST, "--port", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=server_env(database_url),
        )
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
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(self.url + "/healthz", timeout=2) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError("server did not become healthy")

    def _sample(self) -> None:
        while not self._stop.wait(RSS_SAMPLE_SECONDS):
            with contextlib.suppress(psutil.Error):
                self.rss_samples.append((time.monotonic(), self.ps.memory_info().rss))

    def peak_rss(self, since: float, until: float) -> int:
        window = [rss for at, rss in self.rss_samples if since <= at <= until]
        return max(window, default=0)

    def succeeded_total(self) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith("packages_success_total "):
                return float(line.split()[1])
        return 0.0

    def stop(self) -> None:
        self._stop.set()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self._log.close()


# Databases ----------------------------------------------------------------------------------


@contextlib.contextmanager
def fresh_database(kind: str, workdir: Path, tag: str) -> Iterator[str]:
    """A migrated, empty database; removed afterwards."""
    if kind == "sqlite":
        path = workdir / f"{tag}.db"
        url = f"sqlite:///{path}"
    else:
        name = f"mainframe_bench_{os.getpid()}_{tag}"
        bulk.drop_database(PG_ADMIN_URL, name)
        url = bulk.create_database(PG_ADMIN_URL, name)
    try:
        cli(url, "db", "upgrade")
        yield url
    finally:
        if kind == "postgresql":
            bulk.drop_database(PG_ADMIN_URL, name)
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def seed(url: str, *, queued: int, finished: int, label: str) -> int:
    """Seed the endpoint's scans; return the endpoint's id."""
    engine = create_store_engine(url)
    try:
        endpoint_id = bulk.endpoint_id_of(engine, ENDPOINT)
        started = time.monotonic()

        def progress(done: int, total: int) -> None:
            if done % 100_000 < bulk.CHUNK_ROWS or done == total:
                log(f"  seeded {done:,}/{total:,}")

        bulk.seed_scans(
            engine,
            endpoint_id=endpoint_id,
            queued=queued,
            finished=finished,
            now_us=time.time_ns() // 1000,
            label=label,
            progress=progress if queued + finished >= 100_000 else None,
        )
        bulk.analyze(engine)
        if queued + finished >= 100_000:
            log(f"  seeding took {time.monotonic() - started:.1f}s")
        return endpoint_id
    finally:
        engine.dispose()


def top_up(url: str, endpoint_id: int, *, queued: int, label: str) -> dict[str, int]:
    """Bring the endpoint back to `queued` QUEUED scans; return the counts per status."""
    engine = create_store_engine(url)
    try:
        counts = bulk.count_by_status(engine, endpoint_id=endpoint_id)
        missing = queued - counts.get("QUEUED", 0)
        if missing > 0:
            bulk.seed_scans(
                engine,
                endpoint_id=endpoint_id,
                queued=missing,
                finished=0,
                now_us=time.time_ns() // 1000,
                label=label,
            )
            counts = bulk.count_by_status(engine, endpoint_id=endpoint_id)
        return counts
    finally:
        engine.dispose()


def print_explain(url: str, endpoint_id: int, *, title: str, batch: int) -> None:
    engine = create_store_engine(url)
    try:
        plans = bulk.explain_lease(
            engine, endpoint_id=endpoint_id, batch=batch, now_us=time.time_ns() // 1000
        )
    finally:
        engine.dispose()
    print(f"\n### EXPLAIN — {title}\n")
    for name, plan in plans.items():
        print(f"-- {name}\n{plan}\n")
    sys.stdout.flush()


# One measurement ----------------------------------------------------------------------------


@dataclass
class RunResult:
    db: str
    table_rows: int
    queued: int
    batch: int
    workers: int
    run: int
    scans_per_s: float
    poll_p50_ms: float
    poll_p99_ms: float
    result_p50_ms: float
    result_p99_ms: float
    server_cpu_pct: float
    server_us_per_scan: float
    server_peak_rss_mib: float
    client_cpu_pct: float
    pg_cpu_pct: float
    other_cpu_pct: float
    rejected: int
    http_errors: int
    empty_polls: int
    server_counted: int
    client_accepted: int


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def machine_busy_seconds() -> float:
    times = psutil.cpu_times()._asdict()
    # guest time is already inside user; steal and iowait are not this machine's work.
    idle = ("idle", "iowait", "steal", "guest", "guest_nice")
    return float(sum(v for k, v in times.items() if k not in idle))


@dataclass(frozen=True)
class Setup:
    db: str
    table_rows: int
    queued: int
    url: str
    server: Server
    tokens: list[str]


def backends_of(database_url: str) -> list[psutil.Process]:
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


def total_cpu(procs: list[psutil.Process]) -> dict[int, float]:
    seconds = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            seconds[proc.pid] = cpu_seconds(proc)
    return seconds


def delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(after[pid] - before[pid] for pid in after if pid in before)


def wait_for_quiet(setup: Setup, limit: float) -> float:
    """Wait (at most `limit` seconds) until processes outside this benchmark use less than
    QUIET_CORES; return the foreign load last seen, in cores."""
    ours = [setup.server.ps, psutil.Process(), *backends_of(setup.url)]
    deadline = time.monotonic() + limit
    while True:
        busy, mine = machine_busy_seconds(), total_cpu(ours)
        time.sleep(1.0)
        foreign = machine_busy_seconds() - busy - delta(mine, total_cpu(ours))
        if foreign < QUIET_CORES or time.monotonic() >= deadline:
            return foreign
        log(f"  waiting for a quiet machine: {foreign:.2f} cores busy outside the benchmark")


def start_profiler(
    setup: Setup, args: argparse.Namespace, batch: int, run: int
) -> subprocess.Popen[bytes] | None:
    """py-spy on the server for the measured window of each mode's first run (--profile)."""
    if args.profile is None or run != 1:
        return None
    args.profile.mkdir(parents=True, exist_ok=True)
    out = args.profile / f"{setup.db}-{setup.table_rows}-b{batch}.txt"
    return subprocess.Popen(
        [
            "py-spy",
            "record",
            "--nonblocking",
            "--format",
            "raw",
            "-r",
            "100",
            "-o",
            str(out),
            "--pid",
            str(setup.server.proc.pid),
            "-d",
            str(max(1, int(args.duration))),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def measure(setup: Setup, args: argparse.Namespace, batch: int, run: int) -> RunResult:
    """Spawn the load processes, measure the window after the warm-up, collect the stats."""
    ctx = mp.get_context("spawn")
    start = time.monotonic() + 2.0  # leave time for the spawned interpreters to import
    measure_from = start + args.warmup
    measure_until = measure_from + args.duration
    counted_before = setup.server.succeeded_total()
    procs, pipes = [], []
    for index in range(args.load_procs):
        workers = args.workers // args.load_procs + (index < args.workers % args.load_procs)
        tokens = setup.tokens[index :: args.load_procs] or setup.tokens
        plan = LoadPlan(setup.server.url, tokens, workers, batch, measure_from, measure_until)
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=load_process, args=(plan, send), daemon=True)
        proc.start()
        procs.append(proc)
        pipes.append(receive)
    groups = {
        "clients": [psutil.Process(proc.pid) for proc in procs],
        "server": [setup.server.ps],
        "bench": [psutil.Process()],
    }
    time.sleep(max(0.0, measure_from - time.monotonic()))
    groups["pg"] = backends_of(setup.url)
    before = ({k: total_cpu(v) for k, v in groups.items()}, machine_busy_seconds())
    profiler = start_profiler(setup, args, batch, run)
    time.sleep(max(0.0, measure_until - time.monotonic()))
    after = ({k: total_cpu(v) for k, v in groups.items()}, machine_busy_seconds())
    stats = [_receive(pipe, measure_until) for pipe in pipes]
    for proc in procs:
        proc.join(timeout=EXTRA_RUN_SECONDS)
    if profiler is not None:
        profiler.wait(timeout=EXTRA_RUN_SECONDS)
    cpu = {k: 100 * delta(before[0][k], after[0][k]) / args.duration for k in groups}
    cpu["machine"] = 100 * (after[1] - before[1]) / args.duration
    return _result(
        setup,
        args,
        batch,
        run,
        stats,
        cpu,
        setup.server.peak_rss(measure_from, measure_until),
        int(setup.server.succeeded_total() - counted_before),
    )


def _receive(pipe: Any, until: float) -> LoadStats:
    if not pipe.poll(max(1.0, until - time.monotonic() + EXTRA_RUN_SECONDS)):
        raise RuntimeError("a load process did not report back")
    return LoadStats(**pipe.recv())


def _result(
    setup: Setup,
    args: argparse.Namespace,
    batch: int,
    run: int,
    stats: list[LoadStats],
    cpu: dict[str, float],
    peak_rss: int,
    server_counted: int,
) -> RunResult:
    polls = [ms for s in stats for ms in s.poll_ms]
    results = [ms for s in stats for ms in s.result_ms]
    foreign = cpu["machine"] - cpu["server"] - cpu["clients"] - cpu["pg"] - cpu["bench"]
    in_window = sum(s.accepted_in_window for s in stats)
    return RunResult(
        db=setup.db,
        table_rows=setup.table_rows,
        queued=setup.queued,
        batch=batch,
        workers=args.workers,
        run=run,
        scans_per_s=in_window / args.duration,
        poll_p50_ms=quantile(polls, 0.50),
        poll_p99_ms=quantile(polls, 0.99),
        result_p50_ms=quantile(results, 0.50),
        result_p99_ms=quantile(results, 0.99),
        server_cpu_pct=cpu["server"],
        server_us_per_scan=cpu["server"] * args.duration * 1e4 / max(in_window, 1),
        server_peak_rss_mib=peak_rss / MIB,
        client_cpu_pct=cpu["clients"],
        pg_cpu_pct=cpu["pg"],
        other_cpu_pct=foreign,
        rejected=sum(s.rejected for s in stats),
        http_errors=sum(s.http_errors for s in stats),
        empty_polls=sum(s.empty_polls for s in stats),
        server_counted=server_counted,
        client_accepted=sum(s.accepted_total for s in stats),
    )


# Reporting ----------------------------------------------------------------------------------

COLUMNS = (
    ("db", "db", "{}"),
    ("rows", "table_rows", "{:,}"),
    ("batch", "batch", "{}"),
    ("W", "workers", "{}"),
    ("run", "run", "{}"),
    ("scans/s", "scans_per_s", "{:,.0f}"),
    ("poll p50 ms", "poll_p50_ms", "{:.1f}"),
    ("poll p99 ms", "poll_p99_ms", "{:.1f}"),
    ("result p99 ms", "result_p99_ms", "{:.1f}"),
    ("server CPU %", "server_cpu_pct", "{:.0f}"),
    ("server CPU µs/scan", "server_us_per_scan", "{:.0f}"),
    ("server peak RSS MiB", "server_peak_rss_mib", "{:.0f}"),
    ("client CPU %", "client_cpu_pct", "{:.0f}"),
    ("PG CPU %", "pg_cpu_pct", "{:.0f}"),
    ("other CPU %", "other_cpu_pct", "{:.0f}"),
)


def row_cells(result: dict[str, Any]) -> list[str]:
    return [fmt.format(result[key]) for _, key, fmt in COLUMNS]


def print_run(result: RunResult) -> None:
    cells = row_cells(asdict(result))
    extra = (
        f"rejected={result.rejected} http_errors={result.http_errors} "
        f"empty_polls={result.empty_polls} accepted={result.client_accepted} "
        f"server_counted={result.server_counted}"
    )
    print(
        "  ".join(f"{name}={cell}" for (name, _, _), cell in zip(COLUMNS, cells, strict=True))
        + "  "
        + extra,
        flush=True,
    )


def medians(results: list[RunResult]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int, int], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.db, result.table_rows, result.batch), []).append(result)
    rows = []
    for group in groups.values():
        row = asdict(group[0])
        row["run"] = f"median of {len(group)}"
        for key in row:
            if isinstance(row[key], float):
                row[key] = statistics.median(getattr(r, key) for r in group)
        rows.append(row)
    return rows


def print_tables(results: list[RunResult]) -> None:
    rows = medians(results)
    headers = [name for name, _, _ in COLUMNS]
    cells = [row_cells(row) for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    print("\n## Medians\n")
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    for line in cells:
        print("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)))
    print("\n## Markdown\n")
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join(" --- " for _ in headers) + "|")
    for line in cells:
        print("| " + " | ".join(line) + " |")
    sys.stdout.flush()


# Orchestration ------------------------------------------------------------------------------


def create_tokens(url: str, count: int) -> list[str]:
    names = [f"bench-worker-{i}" for i in range(count)]
    with ThreadPoolExecutor(max_workers=min(4, count)) as pool:
        return list(
            pool.map(
                lambda name: cli(url, "token", "create", "--endpoint", ENDPOINT, "--worker", name),
                names,
            )
        )


def run_configuration(
    db: str, table_rows: int, args: argparse.Namespace, workdir: Path, out: list[RunResult]
) -> None:
    finished = max(0, table_rows - args.queued)
    rows = args.queued + finished
    log(f"{db}: {rows:,} rows ({args.queued:,} queued, {finished:,} finished)")
    with fresh_database(db, workdir, f"{db}_{rows}") as url:
        cli(url, "owner", "create", OWNER)
        cli(url, "endpoint", "create", ENDPOINT, "--owner", OWNER)
        endpoint_id = seed(url, queued=args.queued, finished=finished, label="seed")
        if args.explain:
            print_explain(
                url,
                endpoint_id,
                title=f"{db}, {rows:,} rows, freshly seeded",
                batch=max(args.batch),
            )
        tokens = create_tokens(url, args.workers)
        server = Server(url, workdir)
        log(f"  server pid {server.proc.pid} on {server.url}")
        try:
            setup = Setup(db, rows, args.queued, url, server, tokens)
            for batch in args.batch:
                for run in range(1, args.runs + 1):
                    counts = top_up(url, endpoint_id, queued=args.queued, label=f"b{batch}r{run}")
                    log(f"  batch {batch} run {run}: table {counts}")
                    foreign = wait_for_quiet(setup, args.quiet_wait)
                    if foreign >= QUIET_CORES:
                        log(f"  measuring anyway: {foreign:.2f} cores busy elsewhere")
                    result = measure(setup, args, batch, run)
                    print_run(result)
                    out.append(result)
        finally:
            server.stop()
        if args.explain:
            print_explain(
                url,
                endpoint_id,
                title=f"{db}, {rows:,}-row configuration after "
                "the runs (finished scans now precede the queue)",
                batch=max(args.batch),
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument(
        "--queued",
        type=int,
        default=200_000,
        help="QUEUED scans at the start of every run (topped up between runs)",
    )
    parser.add_argument(
        "--table-rows",
        type=int,
        nargs="+",
        default=[0, 1_000_000],
        help="table sizes to test; rows beyond --queued are FINISHED filler "
        "(0 = only the queued rows)",
    )
    parser.add_argument("--workers", type=int, default=16, help="concurrent workers W")
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[1, 10],
        choices=range(1, 101),
        metavar="N",
        help="lease batch sizes; 1 reports single results, more report through the batch route",
    )
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds before each window")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load-procs", type=int, default=2, help="load-generator processes")
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print the job poll's query plans before and after the runs",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=120.0,
        help="seconds to wait, before each run, for other processes to leave "
        "the CPU (see the 'other CPU %%' column)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="record the server with py-spy (collapsed stacks) during the "
        "first run of each mode; the figures of those runs include its cost",
    )
    parser.add_argument(
        "--server-src",
        type=Path,
        metavar="DIR",
        help="run the server and CLI from this source tree (put first on PYTHONPATH), to "
        "compare a change against the installed code; --explain still shows the installed code",
    )
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.load_procs < 1 or args.runs < 1 or args.duration <= 0:
        parser.error("--workers, --load-procs, --runs and --duration must be positive")
    args.load_procs = min(args.load_procs, args.workers)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    dbs = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    if args.server_src is not None:
        paths = [str(args.server_src.resolve()), os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    workdir = Path(tempfile.mkdtemp(prefix="mainframe-bench-"))
    print(
        f"# Mainframe bench: W={args.workers}, load procs={args.load_procs}, "
        f"duration={args.duration}s x {args.runs} runs, cores={psutil.cpu_count()}",
        flush=True,
    )
    results: list[RunResult] = []
    failures = []
    try:
        for db in dbs:
            for table_rows in args.table_rows:
                try:
                    run_configuration(db, table_rows, args, workdir, results)
                except Exception as exc:  # report it and go on with the next configuration
                    failures.append(f"{db}, {table_rows:,} rows: {exc.__class__.__name__}: {exc}")
                    log(f"  FAILED: {failures[-1][-3000:]}")
    finally:
        if args.json is not None:
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
        shutil.rmtree(workdir, ignore_errors=True)
    print_tables(results)
    for failure in failures:
        print(f"\nFAILED: {failure.splitlines()[0]}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()

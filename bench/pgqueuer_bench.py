"""pgqueuer in process on the same PostgreSQL: the yardstick Mainframe's batch-10 loop is
held to ("over HTTP, at least as fast as an in-process PostgreSQL queue").

On a fresh database of its own (CREATE DATABASE beside the bench's), it installs pgqueuer's
schema, and before every run enqueues jobs until `--queued` wait (timed apart: the enqueue
figure). Then `--consumers` processes each run pgqueuer's QueueManager over one asyncpg
connection with `batch_size=--batch`; the job handler does nothing, as the bench's HTTP
workers do nothing but report. A job counts as completed when its handler returns inside
the window; at the end, the completions must equal the jobs gone from pgqueuer's table
(database truth, after the consumers have flushed and exited).

Needs the bench extra: .venv/bin/pip install -e '.[bench]'. See bench/README.md.

    python bench/pgqueuer_bench.py --queued 200000 --duration 10 --runs 3 \\
        --json /tmp/pgqueuer.json --against /tmp/bench.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import statistics
import time
from dataclasses import asdict, dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import psutil
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager

import measure
import report
from servers import Stack, log, pg_backends, pg_database

ENTRYPOINT = "scan"
# Time for the spawned consumers to import pgqueuer and connect before the clock starts.
SPAWN_SECONDS = 3.0
# Seconds a consumer may take past its deadline to finish its jobs and flush.
EXTRA_SECONDS = 60.0
# Consumers stop this long after the window, so that their PostgreSQL backends are still
# there to be read when the window's CPU is taken (an exited process's CPU cannot be).
TAIL_SECONDS = 1.0
MIB = 1024 * 1024


@dataclass(frozen=True)
class ConsumerPlan:
    url: str
    batch: int
    measure_from: float  # time.monotonic(), system-wide on Linux: shared with the parent
    measure_until: float
    deadline: float  # the consumer shuts down then


@dataclass
class ConsumerStats:
    handled: int = 0  # jobs whose handler returned
    in_window: int = 0  # of which inside [measure_from, measure_until)


@dataclass
class PgqFigure:
    db: str
    servers: str  # "in-process": no server, the consumer is the queue's client
    figure: str  # pgqueuer b10, pgqueuer enqueue
    target: int
    queued: int  # jobs waiting at the start
    run: int
    consumers: int
    jobs_per_s: float
    consumer_cpu_pct: float  # the consumer processes, % of one core
    consumer_us_per_job: float
    consumer_rss_mib: float  # at the end of the window
    pg_cpu_pct: float  # the PostgreSQL backends of this database
    pg_us_per_job: float
    other_cpu_pct: float
    check: str
    note: str = ""


COLUMNS = (
    ("db", "db", "{}"),
    ("srv", "servers", "{}"),
    ("figure", "figure", "{}"),
    ("queued", "queued", "{:,.0f}"),
    ("run", "run", "{}"),
    ("consumers", "consumers", "{}"),
    ("jobs/s", "jobs_per_s", "{:,.0f}"),
    ("consumer CPU %", "consumer_cpu_pct", "{:.0f}"),
    ("consumer µs/job", "consumer_us_per_job", "{:,.0f}"),
    ("RSS MiB", "consumer_rss_mib", "{:.0f}"),
    ("PG CPU %", "pg_cpu_pct", "{:.0f}"),
    ("PG µs/job", "pg_us_per_job", "{:,.0f}"),
    ("other CPU %", "other_cpu_pct", "{:.0f}"),
    ("check", "check", "{}"),
)


# The consumer process -------------------------------------------------------------------------


def consumer_process(plan: ConsumerPlan, out: Connection) -> None:
    """Entry point of one consumer: run pgqueuer until the deadline, send back its counts."""
    try:
        import uvloop

        stats = uvloop.run(_consume(plan))
    except ImportError:
        stats = asyncio.run(_consume(plan))
    out.send(asdict(stats))
    out.close()


async def _consume(plan: ConsumerPlan) -> ConsumerStats:
    stats = ConsumerStats()
    connection = await asyncpg.connect(plan.url)
    try:
        manager = QueueManager(Queries(AsyncpgDriver(connection)))

        @manager.entrypoint(ENTRYPOINT)
        async def scan(job: Job) -> None:
            done = time.monotonic()
            stats.handled += 1
            stats.in_window += plan.measure_from <= done < plan.measure_until

        delay = max(0.0, plan.deadline - time.monotonic())
        asyncio.get_running_loop().call_later(delay, manager.shutdown.set)
        await manager.run(batch_size=plan.batch)
    finally:
        await connection.close()
    return stats


# The queue, from the parent -------------------------------------------------------------------


async def _queries(url: str) -> tuple[asyncpg.Connection, Queries]:
    connection = await asyncpg.connect(url)
    return connection, Queries(AsyncpgDriver(connection))


async def _install(url: str) -> None:
    connection, queries = await _queries(url)
    try:
        await queries.install()
    finally:
        await connection.close()


async def _counts(url: str) -> dict[str, int]:
    """Jobs in pgqueuer's table by status (queued, picked, ...), from its own statistics."""
    connection, queries = await _queries(url)
    try:
        counts: dict[str, int] = {}
        for row in await queries.queue_size():
            counts[row.status] = counts.get(row.status, 0) + row.count
        return counts
    finally:
        await connection.close()


def _payload(label: str, n: int) -> bytes:
    """The payload of a scan as the HTTP bench submits it, so rows weigh the same."""
    name = f"{label}-{n}"
    return orjson.dumps(
        {
            "name": name,
            "version": "1.0.0",
            "kind": "malware",
            "payload": {"urls": [f"https://files.example/{name}-1.0.0.tar.gz"]},
        }
    )


async def _enqueue(url: str, count: int, chunk: int, label: str) -> None:
    connection, queries = await _queries(url)
    try:
        for first in range(0, count, chunk):
            n = min(chunk, count - first)
            payloads: list[bytes | None] = [_payload(label, first + i) for i in range(n)]
            await queries.enqueue([ENTRYPOINT] * n, payloads, [0] * n)
    finally:
        await connection.close()


async def _analyze(url: str) -> None:
    """Refresh the planner's statistics of the database (pgqueuer's tables alone live there).

    A table filled a moment ago still has the statistics of an empty one until autovacuum's
    next pass (up to a minute later); meanwhile the planner reads the whole queue and sorts it
    on every dequeue (74 ms instead of 0.9 ms at 50,000 jobs). A queue in service has its
    statistics, so the bench gives pgqueuer the same."""
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("ANALYZE")
    finally:
        await connection.close()


# One measurement ------------------------------------------------------------------------------


@dataclass
class Window:
    stats: ConsumerStats
    seconds: float
    cpu: dict[str, float]  # consumers, pg, bench, other: % of one core
    rss: int
    gone: int  # jobs that left pgqueuer's table while the consumers ran
    backends: tuple[int, int]  # PostgreSQL backends of the database seen at start and end


def _spawn(plans: list[ConsumerPlan]) -> tuple[list[Any], list[Connection]]:
    ctx = mp.get_context("spawn")
    procs, pipes = [], []
    for plan in plans:
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=consumer_process, args=(plan, send), daemon=True)
        proc.start()
        procs.append(proc)
        pipes.append(receive)
    return procs, pipes


def _snapshot(groups: dict[str, list[psutil.Process]]) -> tuple[dict[str, dict[int, float]], float]:
    return {k: measure.cpu_seconds(v) for k, v in groups.items()}, measure.machine_busy_seconds()


def run_window(url: str, args: argparse.Namespace) -> Window:
    """Run the consumers once; account the window [measure_from, measure_until)."""
    before_rows = sum(asyncio.run(_counts(url)).values())
    measure_from = time.monotonic() + SPAWN_SECONDS + args.warmup
    until = measure_from + args.duration
    plan = ConsumerPlan(url, args.batch, measure_from, until, until + TAIL_SECONDS)
    procs, pipes = _spawn([plan] * args.consumers)
    time.sleep(max(0.0, plan.measure_from - time.monotonic()))
    groups = {
        "consumers": [psutil.Process(proc.pid) for proc in procs],
        "bench": [psutil.Process()],
        "pg": pg_backends(url),
    }
    before = _snapshot(groups)
    began = time.monotonic()
    time.sleep(max(0.0, plan.measure_until - time.monotonic()))
    seen_first = len(groups["pg"])
    groups["pg"] = pg_backends(url)
    after = _snapshot(groups)
    span = max(time.monotonic() - began, 1e-3)
    rss = 0
    for proc in groups["consumers"]:
        with contextlib.suppress(psutil.Error):
            rss += proc.memory_info().rss
    stats = ConsumerStats()
    for pipe in pipes:
        if not pipe.poll(EXTRA_SECONDS):
            raise RuntimeError("a consumer did not report back")
        got = replace(ConsumerStats(), **pipe.recv())
        stats.handled += got.handled
        stats.in_window += got.in_window
    for proc in procs:
        proc.join(timeout=EXTRA_SECONDS)
    cpu = {k: 100 * measure.delta(before[0][k], after[0][k]) / span for k in groups}
    cpu["other"] = 100 * (after[1] - before[1]) / span - sum(cpu.values())
    gone = before_rows - sum(asyncio.run(_counts(url)).values())
    backends = (seen_first, len(groups["pg"]))
    return Window(stats, plan.measure_until - plan.measure_from, cpu, rss, gone, backends)


def _per_job(cpu_pct: float, per_second: float) -> float:
    return cpu_pct * 1e4 / per_second if per_second else float("nan")


def figure(args: argparse.Namespace, run: int, queued: int, window: Window) -> PgqFigure:
    rate = window.stats.in_window / window.seconds
    handled, gone = window.stats.handled, window.gone
    check = "ok" if handled == gone else f"MISMATCH: handled {handled:,}, gone {gone:,}"
    left = queued - handled
    notes = ["the queue ran dry: raise --queued"] if left < args.consumers * args.batch else []
    if min(window.backends) < args.consumers:  # PG CPU % would then miss a connection's work
        notes.append(f"PostgreSQL backends seen at start, end: {window.backends}")
    return PgqFigure(
        db="postgresql",
        servers="in-process",
        figure=f"pgqueuer b{args.batch}",
        target=args.queued,
        queued=queued,
        run=run,
        consumers=args.consumers,
        jobs_per_s=rate,
        consumer_cpu_pct=window.cpu["consumers"],
        consumer_us_per_job=_per_job(window.cpu["consumers"], rate),
        consumer_rss_mib=window.rss / MIB,
        pg_cpu_pct=window.cpu["pg"],
        pg_us_per_job=_per_job(window.cpu["pg"], rate),
        other_cpu_pct=window.cpu["other"],
        check=check,
        note="; ".join(notes),
    )


def enqueue_figure(
    args: argparse.Namespace, run: int, queued: int, added: int, seconds: float
) -> PgqFigure:
    """The top-up before a run, as a figure of its own (it is not part of the consumer's)."""
    nan = float("nan")
    return PgqFigure(
        db="postgresql",
        servers="in-process",
        figure="pgqueuer enqueue",
        target=args.queued,
        queued=queued,
        run=run,
        consumers=1,
        jobs_per_s=added / seconds if seconds else nan,
        consumer_cpu_pct=nan,
        consumer_us_per_job=nan,
        consumer_rss_mib=nan,
        pg_cpu_pct=nan,
        pg_us_per_job=nan,
        other_cpu_pct=nan,
        check="ok",
        note=f"{added:,} jobs in chunks of {args.enqueue_chunk:,}",
    )


# Report ---------------------------------------------------------------------------------------


def _cells(row: dict[str, Any]) -> list[str]:
    return [fmt.format(row[key]) for _, key, fmt in COLUMNS]


def print_figure(fig: PgqFigure) -> None:
    cells = _cells(asdict(fig))
    pairs = [f"{name}={cell}" for (name, _, _), cell in zip(COLUMNS, cells, strict=True)]
    print("  ".join(pairs) + (f"  note: {fig.note}" if fig.note else ""), flush=True)


def record(figures: list[PgqFigure], fig: PgqFigure) -> None:
    print_figure(fig)
    figures.append(fig)


def medians(figures: list[PgqFigure]) -> list[dict[str, Any]]:
    groups: dict[str, list[PgqFigure]] = {}
    for fig in figures:
        groups.setdefault(fig.figure, []).append(fig)
    rows = []
    for group in groups.values():
        row = asdict(group[0])
        row["run"] = f"median of {len(group)}" if len(group) > 1 else "1"
        for key, value in row.items():
            if isinstance(value, int | float) and key not in ("target", "consumers"):
                row[key] = statistics.median(getattr(f, key) for f in group)
        checks = {f.check for f in group}
        row["check"] = "ok" if checks == {"ok"} else "; ".join(sorted(checks))
        rows.append(row)
    return rows


def beside_mainframe(rows: list[dict[str, Any]], bench_json: Path, batch: int) -> list[str]:
    """Mainframe's `loop b<batch>` on PostgreSQL (medians of a bench.py --json) beside
    pgqueuer's, and the bar: Mainframe over HTTP at least as fast."""
    ours = [
        r
        for r in report.medians(report.load_figures(bench_json))
        if r["db"] == "postgresql" and r["figure"] == f"loop b{batch}"
    ]
    theirs = next((r for r in rows if r["figure"] == f"pgqueuer b{batch}"), None)
    if not ours or theirs is None:
        return [f"no PostgreSQL `loop b{batch}` figure in {bench_json}, or no pgqueuer figure"]
    headers = ["queue", "queued", "scans/s", "process µs/scan", "PG µs/scan", "PG CPU %"]
    table = [
        [
            f"pgqueuer b{batch}, in process, {theirs['consumers']} consumer(s)",
            f"{theirs['queued']:,.0f}",
            f"{theirs['jobs_per_s']:,.0f}",
            f"{theirs['consumer_us_per_job']:,.0f}",
            f"{theirs['pg_us_per_job']:,.0f}",
            f"{theirs['pg_cpu_pct']:.0f}",
        ]
    ]
    lines = []
    for r in ours:
        table.append(
            [
                f"Mainframe loop b{batch}, over HTTP, {r['servers']} server(s)",
                f"{r['queued']:,.0f}",
                f"{r['scans_per_s']:,.0f}",
                f"{r['server_us_per_scan']:,.0f}",
                f"{r['pg_us_per_scan']:,.0f}",
                f"{r['pg_cpu_pct']:.0f}",
            ]
        )
        ratio = r["scans_per_s"] / theirs["jobs_per_s"] if theirs["jobs_per_s"] else float("nan")
        verdict = "met" if ratio >= 1.0 else "NOT MET"
        lines.append(
            f"- Mainframe ({r['servers']} srv, {r['target']:,} queued) over pgqueuer: "
            f"{ratio:.2f} (bar: >= 1.00): {verdict}"
        )
    return [*report.markdown(headers, table), "", *lines]


def print_tables(figures: list[PgqFigure], args: argparse.Namespace) -> None:
    rows = medians(figures)
    if not rows:
        print("\nno figures", flush=True)
        return
    headers = [name for name, _, _ in COLUMNS]
    table = [_cells(row) for row in rows]
    print("\n## Medians\n")
    print("\n".join(report.aligned(headers, table)))
    print("\n## Markdown\n")
    print("\n".join(report.markdown(headers, table)))
    if args.against is not None:
        print("\n## Beside Mainframe\n")
        print("\n".join(beside_mainframe(rows, args.against, args.batch)))


# Main -----------------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--queued", type=int, default=200_000, help="jobs waiting at the start of every run")
    add("--batch", type=int, default=10, help="pgqueuer's batch_size (jobs per dequeue)")
    add("--consumers", type=int, default=1, help="consumer processes, one QueueManager each")
    add("--duration", type=float, default=10.0, help="seconds per measured window")
    add("--warmup", type=float, default=2.0, help="seconds of consuming before each window")
    add("--runs", type=int, default=3)
    add("--enqueue-chunk", type=int, default=5_000, help="jobs per enqueue call")
    add("--quiet-wait", type=float, default=120.0, help="seconds to wait for a quiet machine")
    add("--json", type=Path, help="also write every figure here")
    add("--against", type=Path, metavar="JSON", help="a bench.py --json to stand beside")
    args = parser.parse_args(argv)
    positive = (args.queued, args.batch, args.consumers, args.runs, args.enqueue_chunk)
    if min(positive) < 1 or args.duration <= 0:
        parser.error("counts and durations must be positive")
    return args


def top_up(url: str, args: argparse.Namespace, run: int) -> tuple[int, PgqFigure | None]:
    """Enqueue up to --queued waiting jobs; the count then, and the enqueue figure."""
    queued = asyncio.run(_counts(url)).get("queued", 0)
    if queued >= args.queued:
        return queued, None
    added = args.queued - queued
    started = time.monotonic()
    asyncio.run(_enqueue(url, added, args.enqueue_chunk, f"r{run}"))
    seconds = time.monotonic() - started
    asyncio.run(_analyze(url))
    log(f"  enqueued {added:,} in {seconds:.1f}s")
    return queued + added, enqueue_figure(args, run, queued, added, seconds)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    print(
        f"# pgqueuer bench: batch={args.batch}, consumers={args.consumers}, "
        f"{args.duration}s x {args.runs} runs, queued={args.queued:,}, "
        f"cores={psutil.cpu_count()}",
        flush=True,
    )
    figures: list[PgqFigure] = []
    try:
        with pg_database("pgq") as url:
            asyncio.run(_install(url))
            stack = Stack("postgresql", url, servers=[])
            for run in range(1, args.runs + 1):
                queued, enqueued = top_up(url, args, run)
                if enqueued is not None:
                    record(figures, enqueued)
                measure.wait_for_quiet(stack, args.quiet_wait)
                record(figures, figure(args, run, queued, run_window(url, args)))
    finally:
        if args.json is not None:
            args.json.write_text(json.dumps([asdict(f) for f in figures], indent=1))
    print_tables(figures, args)


if __name__ == "__main__":
    main()

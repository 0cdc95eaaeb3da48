"""The benchmark's command line: what to measure, at which queue sizes, how long, and how the
servers run. Defaults give the figures of docs/performance.md (16 workers, 32 intake requests
in flight)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import cpucap
import measure

MODES = ("intake", "loop")
# The worker loop: complete-and-fetch (a result reply hands out the next jobs), or the
# two-request loop (poll, then report) it replaces, kept for before/after figures.
LOOPS = ("fetch", "no-fetch")
POOLERS = ("none", "session", "transaction", "prepared")


def parse(argv: list[str] | None, *, description: str) -> argparse.Namespace:
    """The benchmark's command line; --profile fails early when py-spy is missing."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--db", choices=("sqlite", "postgresql", "both"), default="both")
    add("--mode", nargs="+", choices=MODES, default=list(MODES), help="what to measure")
    add(
        "--intake-at",
        type=int,
        nargs="+",
        default=[0, 1_000_000],
        metavar="N",
        help="queue sizes at which to measure single-route intake",
    )
    add(
        "--queued",
        type=int,
        nargs="+",
        default=[200_000],
        metavar="N",
        help="queue sizes at which to run the worker loop (topped up before every run)",
    )
    add("--intake-in-flight", type=int, default=32, help="concurrent single-route submissions")
    add("--workers", type=int, default=16, help="concurrent workers in the loop")
    add(
        "--batch",
        type=int,
        nargs="+",
        default=[1, 10],
        choices=range(1, 101),
        metavar="N",
        help="lease batch sizes; 1 reports single results, more the batch route",
    )
    add(
        "--loop",
        nargs="+",
        choices=LOOPS,
        default=["fetch"],
        help="worker loops to measure: fetch reports with ?next=<batch> and polls only with "
        "empty hands; no-fetch polls for every batch, then reports (both: before/after)",
    )
    add(
        "--no-fetch",
        dest="loop",
        action="store_const",
        const=["no-fetch"],
        help="the two-request loop only (same as --loop no-fetch)",
    )
    add(
        "--checkpoint",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on PostgreSQL, a CHECKPOINT before each figure, so every window starts as far "
        "from one as the others and none begins inside it (a window's WAL a scan then "
        "includes the images of the pages its scans first change; see dbwork.py)",
    )
    add("--duration", type=float, default=15.0, help="seconds per measured window")
    add("--warmup", type=float, default=2.0, help="seconds of load before each window")
    add("--ceiling-duration", type=float, default=5.0, help="seconds of GET /healthz before each")
    add("--runs", type=int, default=3, help="measured windows of each figure on one database")
    add(
        "--rounds",
        type=int,
        default=1,
        help="times to measure every stack (database, server processes, pooler), each on a "
        "fresh database, every other round in the reverse order; medians take every round's "
        "runs (e.g. --runs 1 --rounds 4 for two stacks compared fairly)",
    )
    add("--load-procs", type=int, default=2, help="load-generator processes")
    add(
        "--servers",
        type=int,
        nargs="+",
        default=[1],
        metavar="N",
        help="server processes on one PostgreSQL database; several counts (e.g. 1 3) measure "
        "each on a fresh database of its own",
    )
    add(
        "--pooler",
        nargs="+",
        choices=POOLERS,
        default=["none"],
        help="PostgreSQL: reach it directly (none) and/or through a PgBouncer of the bench's "
        "own in session or transaction pooling, each on a fresh database (e.g. none "
        "transaction, for PgBouncer beside direct in one run); prepared: transaction pooling "
        "through PgBouncer 1.24 with max_prepared_statements (bash .ci/pgbouncer-newer)",
    )
    add("--server-workers", type=int, default=1, help="`mainframe serve --workers N` if N > 1")
    add(
        "--server-cpu",
        type=float,
        metavar="CORES",
        help="limit each server process to CORES of the machine's cores (a cgroup CPU quota; "
        "root), as if each ran on a host of its own: --servers 1 3 --server-cpu 0.3 then "
        "measures scale-out rather than three processes sharing this machine's cores",
    )
    add("--fill-step", type=int, default=250_000, help="scans per reported fill step")
    add("--fill-timeout", type=float, default=3600.0, help="seconds a fill step may take")
    add(
        "--quiet-wait",
        type=float,
        default=120.0,
        help="seconds to wait before each measurement for other processes to leave the CPU",
    )
    add(
        "--profile",
        type=Path,
        metavar="DIR",
        help="py-spy the servers during the first run of each figure (costs them CPU)",
    )
    add(
        "--server-src",
        type=Path,
        metavar="DIR",
        help="run the server and CLI from this source tree (first on PYTHONPATH)",
    )
    add(
        "--server-env",
        action="append",
        default=[],
        metavar="MAINFRAME_NAME=VALUE",
        help="a setting for the servers (repeat for more), e.g. MAINFRAME_SWEEP_SECONDS=1 "
        "MAINFRAME_FINISHED_RETENTION_DAYS=0 to measure the loop while it is pruned",
    )
    add(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a PostgreSQL setting for each fresh bench database (ALTER DATABASE ... SET; "
        "repeat for more), e.g. wal_compression=lz4 or commit_delay=500",
    )
    add("--json", type=Path, help="also write every figure here")
    args = parser.parse_args(argv)
    args.servers = sorted(set(args.servers))
    args.loop = list(dict.fromkeys(args.loop))
    args.pooler = list(dict.fromkeys(args.pooler))
    positive = (args.workers, args.load_procs, args.runs, *args.servers, args.server_workers)
    if min(positive) < 1 or args.duration <= 0 or args.fill_step < 1:
        parser.error("counts and durations must be positive")
    if args.profile is not None:
        measure.py_spy()
    if args.server_cpu is not None:
        cpucap.check(args.server_cpu)
    args.server_env = dict(_setting(parser, item) for item in args.server_env)
    args.pg_setting = dict(_pg_setting(parser, item) for item in args.pg_setting)
    return args


def _pg_setting(parser: argparse.ArgumentParser, item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not re.fullmatch(r"[a-z][a-z0-9_.]*", name):
        parser.error(f"--pg-setting takes NAME=VALUE with a setting's name, not {item!r}")
    return name, value


def _setting(parser: argparse.ArgumentParser, item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name.startswith("MAINFRAME_"):
        parser.error(f"--server-env takes MAINFRAME_NAME=VALUE, not {item!r}")
    return name, value

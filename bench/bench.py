"""Throughput benchmark: a real `mainframe serve` driven over HTTP the way users meet it.

For each database it migrates and makes credentials with the CLI, starts the server(s), and
fills the backlog through the public API only (the bulk route, or the single route while the
server does not answer it). At each queue size it measures, in this order:

- intake: `POST /api/v1/scans` with 32 in flight (sizes from --intake-at, e.g. 0 and 1M);
- the closed worker loop: 16 workers lease and report `finished` (sizes from --queued),
  by complete-and-fetch (a result reply hands out the next jobs) or, with --no-fetch, by
  the two-request loop (poll, then report);
- the bulk route's scans/s while it fills the backlog up to each size.

Every figure stands beside the HTTP ceiling measured just before it: `GET /healthz` of the
same servers, same client, same concurrency. See bench/README.md.

    python bench/bench.py --db both --queued 200000 1000000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import psutil

import dbwork
import feed
import fill
import measure
import options
import report
from fill import Intake
from load import LoadStats
from measure import Window
from report import Figure
from servers import (
    Credentials,
    Stack,
    fresh_database,
    log,
    make_credentials,
    queued_count,
    running,
)


class Bench:
    """The measurements of one database behind its servers, in queue-size order."""

    def __init__(
        self,
        stack: Stack,
        creds: Credentials,
        args: argparse.Namespace,
        figures: list[Figure],
        notes: list[str],
    ) -> None:
        self.stack, self.creds, self.args = stack, creds, args
        self.figures, self.notes = figures, notes
        self.profiled: set[str] = set()
        self._labels = 0
        self.intake: Intake = fill.probe_bulk(stack, creds.sources[0], self.label("probe"))
        if self.intake.note:
            log(f"  {self.intake.note}")
            self.notes.append(f"{stack.db}: {self.intake.note}")

    def label(self, prefix: str) -> str:
        """A scan-name prefix never used before on this database."""
        self._labels += 1
        return f"{prefix}{self._labels}"

    def run_sizes(self, sizes: list[int]) -> None:
        for size in sorted(set(sizes)):
            if size:
                self.grow(size)
            if "intake" in self.args.mode and size in self.args.intake_at:
                self.measure_intake(size)
            if "loop" in self.args.mode and size in self.args.queued:
                for batch in self.args.batch:
                    for loop in self.args.loop:
                        self.measure_loop(size, batch, fetch=loop == "fetch")

    def profile_path(self, name: str, size: int) -> Path | None:
        """Where py-spy records the first run of each figure (with --profile)."""
        key = f"{self.stack.db}-{self.stack.label}srv-{re.sub(r'[^a-z0-9]+', '_', name)}-{size}"
        if self.args.profile is None or key in self.profiled:
            return None
        self.profiled.add(key)
        return Path(self.args.profile) / key

    def ceiling(self, in_flight: int) -> Window:
        plans = measure.split(
            "ceiling",
            self.stack,
            procs=self.args.load_procs,
            concurrency=in_flight,
            warmup=1.0,
            duration=self.args.ceiling_duration,
        )
        return measure.run(self.stack, plans)

    def settle(self, size: int) -> int:
        return fill.settle(
            self.stack,
            self.creds,
            self.intake,
            size=size,
            tolerance=max(1_000, size // 50),
            label=self.label("t"),
            procs=self.args.load_procs,
            limit=self.args.fill_timeout,
        )

    def checkpoint(self) -> None:
        if self.args.checkpoint:
            dbwork.checkpoint(self.stack.database_url)

    def record(self, fig: Figure) -> None:
        report.print_figure(fig)
        self.figures.append(fig)

    def grow(self, size: int) -> None:
        """Fill up to `size` in steps of --fill-step, each step a figure of the intake route."""
        while (queued := queued_count(self.stack.database_url)) < size:
            count = min(size - queued, self.args.fill_step)
            measure.wait_for_quiet(self.stack, self.args.quiet_wait)
            in_flight = fill.fill_in_flight(self.stack, self.intake)
            ceiling = self.ceiling(in_flight)
            log(f"  filling {queued:,} -> {queued + count:,} ({self.intake.route})")
            window = fill.fill(
                self.stack,
                self.creds,
                self.intake,
                count=count,
                label=self.label("f"),
                procs=self.args.load_procs,
                limit=self.args.fill_timeout,
                profile=self.profile_path(self.intake.route, queued),
            )
            after = queued_count(self.stack.database_url)
            self.record(
                self.figure(
                    self.intake.route,
                    queued,
                    queued,
                    1,
                    in_flight,
                    window,
                    ceiling,
                    ok=({200}, {201}) if self.intake.bulk else ({201}, set()),
                    check=_ledger(window.stats.items_total, after - queued),
                    note=f"{queued:,} -> {after:,} queued",
                )
            )
            if window.stats.items_total == 0:
                raise RuntimeError("the fill created nothing; see the server log")

    def measure_intake(self, size: int) -> None:
        in_flight = self.args.intake_in_flight
        for run in range(1, self.args.runs + 1):
            queued = self.settle(size)
            self.checkpoint()
            measure.wait_for_quiet(self.stack, self.args.quiet_wait)
            ceiling = self.ceiling(in_flight)
            plans = measure.split(
                "intake",
                self.stack,
                procs=self.args.load_procs,
                concurrency=in_flight,
                tokens=self.creds.sources,
                label=self.label("i"),
                warmup=self.args.warmup,
                duration=self.args.duration,
            )
            window = measure.run(self.stack, plans, profile=self.profile_path("intake", size))
            after = queued_count(self.stack.database_url)
            check = _ledger(window.stats.items_total, after - queued)
            fig = self.figure(
                "intake", size, queued, run, in_flight, window, ceiling, ({201}, set()), check
            )
            self.record(fig)

    def measure_loop(self, size: int, batch: int, *, fetch: bool) -> None:
        name = f"loop b{batch}" + ("" if fetch else " no-fetch")
        ok = ({200}, set()) if batch == 1 else ({200}, {200})
        for run in range(1, self.args.runs + 1):
            queued = self.settle(size)
            self.checkpoint()
            measure.wait_for_quiet(self.stack, self.args.quiet_wait)
            ceiling = self.ceiling(self.args.workers)
            plans = measure.split(
                "loop",
                self.stack,
                procs=self.args.load_procs,
                concurrency=self.args.workers,
                tokens=self.creds.workers,
                batch=batch,
                warmup=self.args.warmup,
                duration=self.args.duration,
                fetch=fetch,
            )
            feeder = self.feeder(size, ceiling)
            window = measure.run(self.stack, plans, profile=self.profile_path(name, size))
            if feeder is not None:
                feeder.stop()
            accepted, counted = window.stats.items_total, round(window.success_delta)
            check = _ledger(accepted, counted, "packages_success_total")
            if not self.stack.counters_are_exact():
                check = f"unchecked: {accepted} accepted, one worker process saw {counted}"
            if window.stats.leased_total != accepted:  # a lease left behind, or a refusal
                check += f"; leased {window.stats.leased_total:,}, accepted {accepted:,}"
            notes = self.loop_notes(window.stats, fetch)
            if feeder is not None:
                held = f"held at {size:,} queued by a source ({feeder.submitted:,} scans fed)"
                notes = "; ".join(filter(None, [notes, held]))
            if window.db is not None:
                shares = ", ".join(f"{t} {h:.0%}" for t, h in window.db.hot_shares().items())
                read = window.db.busiest(window.stats.items).items()
                most = ", ".join(f"{name} {n:.0f}" for name, n in read)
                written = [f"HOT updates: {shares}", f"buffers a scan, most read: {most}"]
                notes = "; ".join(filter(None, [notes, *written]))
            fig = self.figure(
                name, size, queued, run, self.args.workers, window, ceiling, ok, check, notes
            )
            self.record(fig)

    def feeder(self, size: int, ceiling: Window) -> feed.Feeder | None:
        """A source holding the backlog at `size` while the loop runs, when the loop would
        otherwise drain it before its window ends (feed.py); None when it lasts."""
        seconds = measure.SPAWN_SECONDS + self.args.warmup + self.args.duration
        rps = ceiling.stats.requests / ceiling.seconds
        if not feed.drains(size, ceiling_rps=rps, seconds=seconds):
            return None
        found = feed.Feeder(self.stack, self.creds.sources[0], size, self.label("k"))
        found.start()
        return found

    def loop_notes(self, stats: LoadStats, fetch: bool) -> str:
        """What the figure cannot say itself: a dry queue, a server without `next`."""
        notes = []
        if stats.empty_polls:
            notes.append(f"the queue ran dry ({stats.empty_polls} empty polls): raise --queued")
        fallback = ""
        if fetch and stats.fetch_refused:
            fallback = (
                f"the server refused `next` ({stats.fetch_refused} times, counted as refused): "
                "the workers went on with the two-request loop"
            )
        elif fetch and stats.items_total and not stats.fetch_replies:
            fallback = (
                "no result reply carried `next` (the server predates complete-and-fetch): "
                "the workers polled for every job, so this is the two-request loop"
            )
        if fallback:
            notes.append(fallback)
            self.notes.append(f"{self.stack.db} ({self.stack.label} srv): {fallback}")
        return "; ".join(notes)

    def figure(
        self,
        name: str,
        target: int,
        queued: int,
        run: int,
        in_flight: int,
        window: Window,
        ceiling: Window,
        ok: tuple[set[int], set[int]],
        check: str,
        note: str = "",
    ) -> Figure:
        return report.figure(
            stack_db=self.stack.db,
            servers=self.stack.label,
            name=name,
            target=target,
            queued=queued,
            run=run,
            in_flight=in_flight,
            window=window,
            ceiling=ceiling,
            ok=ok,
            check=check,
            note=note,
        )


def _ledger(client: int, server: int, what: str = "stats queued delta") -> str:
    return "ok" if client == server else f"MISMATCH: client {client:,}, {what} {server:,}"


def stacks(dbs: list[str], args: argparse.Namespace) -> list[tuple[str, int, str]]:
    """Every (database, server processes, pooler) to measure, in order: every server count of
    --servers on PostgreSQL and every pooler of --pooler; one direct server on SQLite."""
    found = []
    for db in dbs:
        counts = args.servers if db == "postgresql" else [1]
        poolers = args.pooler if db == "postgresql" else ["none"]
        found += [(db, count, pooler) for count in counts for pooler in poolers]
    return found


def in_rounds(order: list[tuple[str, int, str]], rounds: int) -> list[tuple[str, int, str]]:
    """The stacks of each round, every other round backwards (A B, B A, A B): a stack that
    runs later in a round (a busier machine, a warmer cache) is not always the same one."""
    return [stack for n in range(rounds) for stack in (order if n % 2 == 0 else order[::-1])]


def run_stack(
    db: str,
    count: int,
    pooler: str,
    args: argparse.Namespace,
    workdir: Path,
    figures: list[Figure],
    notes: list[str],
) -> None:
    tag = f"{db[:2]}{count}{pooler[:3]}"
    with fresh_database(db, workdir, tag, args.pg_setting) as url:
        through = "" if pooler == "none" else f" through PgBouncer ({pooler} pooling)"
        log(f"{db}, {count} server process(es){through}: credentials")
        creds = make_credentials(url, workers=args.workers, sources=args.load_procs)
        workers = args.server_workers
        with running(
            db,
            url,
            workdir,
            count=count,
            workers=workers,
            pooler=pooler,
            settings=args.server_env,
            cpu=args.server_cpu,
        ) as stack:
            sizes = list(args.intake_at if "intake" in args.mode else [])
            sizes += list(args.queued if "loop" in args.mode else [])
            Bench(stack, creds, args, figures, notes).run_sizes(sizes)


def main(argv: list[str] | None = None) -> None:
    args = options.parse(argv, description=__doc__.split("\n\n")[0])
    dbs = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    if args.server_src is not None:
        paths = [str(args.server_src.resolve()), os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    workdir = Path(tempfile.mkdtemp(prefix="mainframe-bench-"))
    print(
        f"# Mainframe bench: W={args.workers}, intake in flight={args.intake_in_flight}, "
        f"load procs={args.load_procs}, {args.duration}s x {args.runs} runs "
        f"x {args.rounds} rounds, "
        f"ceiling {args.ceiling_duration}s, cores={psutil.cpu_count()}, "
        f"server processes={' then '.join(map(str, args.servers))} (PG) "
        f"x {args.server_workers} workers"
        + (f" limited to {args.server_cpu:g} cores each" if args.server_cpu else "")
        + f", loops={' '.join(args.loop)}, "
        f"PostgreSQL {' and '.join(args.pooler)} (pooler)",
        flush=True,
    )
    figures: list[Figure] = []
    notes: list[str] = []
    if args.server_env:
        settings = " ".join(f"{name}={value}" for name, value in args.server_env.items())
        notes.append(f"servers ran with {settings}")
    if args.pg_setting and "postgresql" in dbs:
        settings = " ".join(f"{name}={value}" for name, value in args.pg_setting.items())
        notes.append(f"postgresql: the bench's databases set {settings}")
    if "sqlite" in dbs and args.servers != [1]:
        notes.append("sqlite: one server process (--servers applies to PostgreSQL)")
    failures = []
    try:
        for db, count, pooler in in_rounds(stacks(dbs, args), args.rounds):
            try:
                run_stack(db, count, pooler, args, workdir, figures, notes)
            except Exception as exc:  # report it and go on with the next stack
                failures.append(f"{db}: {exc.__class__.__name__}: {exc}")
                log(f"  FAILED: {failures[-1][-3000:]}")
    finally:
        if args.json is not None:
            args.json.write_text(json.dumps([asdict(f) for f in figures], indent=1))
        shutil.rmtree(workdir, ignore_errors=True)
    report.print_tables(figures, notes)
    for failure in failures:
        print(f"\nFAILED: {failure.splitlines()[0]}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()

"""Today's layout of the live queue beside a narrow live-queue table, measured on PostgreSQL by
the same loop of one scan at a time (a submission, a lease of the oldest due scan, its
finished result with its history row and the outcome totals, each statement a transaction
of its own, as at batch 1). It answers what the layout alone would save before the store's
statements are rewritten for it (docs/performance.md, *The live queue in a table of its
own, measured*):

    PYTHONPATH=src:bench .venv/bin/python bench/layouts.py

Each layout gets a scratch database at the store's newest revision (so the dead-letter
triggers and every other index stay as they are); `live` then moves the ready set, the
leases and the live keys from `scans`' partial indexes to a table `live_scans`, and leaves
on `scans` only indexes over columns a lease and a close do not change, so both can update
it in place (HOT). `lean` is `live` where a lease writes only `live_scans` and the close
copies the lease into `scans`. `--revision` builds the databases at an earlier revision (0025
for `today` before two of its indexes went, docs/performance.md, *One index each*)."""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass

import psutil
import psycopg

import dbwork
from dbwork import DbWork
from measure import cpu_seconds
from walprobe import scratch_database

PAYLOAD = '{"distributions": ["https://files.example/p.tar.gz"]}'
RESULT = '{"score": 3, "inspector_url": null, "rules_matched": [], "commit": "abc"}'
LEASE_US = 60_000_000

# Today's partial indexes over the columns a lease or a close changes (ix_scans_lease_due
# until revision 0026); `live` drops them.
MOVED = [
    "ix_scans_queued",
    "ix_scans_lease_due",
    "ix_scans_pending_lease",
    "ix_scans_quarantined",
    "ux_scans_live_key",
    "ix_scans_ended_key",
    "ix_scans_finished_at",
    "ix_scans_failed_at",
]

LIVE_TABLE = """
CREATE TABLE live_scans (
    scan_id bigint PRIMARY KEY, endpoint_id bigint NOT NULL, status char(1) NOT NULL,
    name varchar(300) NOT NULL, version varchar(200) NOT NULL, kind varchar(100) NOT NULL,
    available_at bigint, lease_expires_at bigint, attempt integer NOT NULL DEFAULT 0,
    assignment_id varchar(64), worker varchar(200), leased_at bigint);
CREATE INDEX ix_live_ready ON live_scans (endpoint_id, available_at, scan_id)
    WHERE status = 'Q';
CREATE INDEX ix_live_due ON live_scans (lease_expires_at) WHERE status = 'P';
CREATE UNIQUE INDEX ux_live_key ON live_scans (endpoint_id, name, version, kind);
-- The ended scans a package's late result is refused for, and retention's walk by age.
CREATE INDEX ix_scans_package ON scans (endpoint_id, name, version, id);
CREATE TABLE ended_scans (finished_at bigint NOT NULL, scan_id bigint NOT NULL,
    PRIMARY KEY (finished_at, scan_id));
"""

# What a close writes beside its scan, in both layouts: its history row and outcome total.
HISTORY = """), history AS (
    INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                          outcome, settled_status, result_digest)
    SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker, leased_at,
           $3, 'finished', 'FINISHED', md5($4)
    FROM closed
"""
TOTAL = """), total AS (
    UPDATE scan_totals SET count = count + 1
    WHERE endpoint_id = (SELECT endpoint_id FROM closed) AND outcome = 'finished'
      AND shard = $5
)
SELECT id FROM closed"""

TODAY = {
    "submit": """
INSERT INTO scans (endpoint_id, queue, name, version, kind, payload, status, verified, source,
                   created_at, updated_at, available_at, attempt_count, attempt_base,
                   redrive_count)
VALUES ($1, 'default', $2, '1.0', 'scan', $3, 'QUEUED', TRUE, 'feed', $4, $4, $4, 0, 0, 0)
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING id""",
    "lease": """
WITH due AS (
    SELECT id FROM scans WHERE endpoint_id = $1 AND status = 'QUEUED' AND available_at <= $2
    ORDER BY available_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
)
UPDATE scans SET status = 'PENDING', attempt_count = scans.attempt_count + 1,
    assignment_id = 'a' || scans.id, worker = 'w1', leased_at = $2,
    lease_expires_at = $2 + $3, wait_reason = NULL, updated_at = $2
FROM due WHERE scans.id = due.id
RETURNING scans.id, scans.assignment_id""",
    "close": """
WITH closed AS (
    UPDATE scans SET status = 'FINISHED', updated_at = $3, lease_expires_at = NULL,
        wait_reason = NULL, finished_at = $3, result = $4, available_at = NULL
    WHERE id = $1 AND status = 'PENDING' AND assignment_id = $2
    RETURNING id, endpoint_id, attempt_count, attempt_base, assignment_id, worker, leased_at
"""
    + HISTORY
    + TOTAL,
}

LIVE_SUBMIT = """
WITH made AS (SELECT nextval('scans_id_seq') AS id), claimed AS (
    INSERT INTO live_scans (scan_id, endpoint_id, status, name, version, kind, available_at)
    SELECT id, $1, 'Q', $2, '1.0', 'scan', $4 FROM made
    ON CONFLICT (endpoint_id, name, version, kind) DO NOTHING
    RETURNING scan_id
)
INSERT INTO scans (id, endpoint_id, queue, name, version, kind, payload, status, verified,
                   source, created_at, updated_at, available_at, attempt_count, attempt_base,
                   redrive_count)
SELECT scan_id, $1, 'default', $2, '1.0', 'scan', $3, 'QUEUED', TRUE, 'feed', $4, $4, $4, 0,
       0, 0
FROM claimed
RETURNING id"""

LIVE_DUE = """
WITH due AS (
    SELECT scan_id FROM live_scans
    WHERE endpoint_id = $1 AND status = 'Q' AND available_at <= $2
    ORDER BY available_at, scan_id LIMIT 1 FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE live_scans SET status = 'P', lease_expires_at = $2 + $3, attempt = attempt + 1,
        assignment_id = 'a' || live_scans.scan_id, worker = 'w1', leased_at = $2
    FROM due WHERE live_scans.scan_id = due.scan_id
    RETURNING live_scans.scan_id, live_scans.assignment_id
)"""

LIVE_CLOSE = (
    """
WITH gone AS (
    DELETE FROM live_scans WHERE scan_id = $1 AND status = 'P' AND assignment_id = $2
    RETURNING scan_id, attempt, assignment_id, worker, leased_at
), closed AS (
    UPDATE scans SET status = 'FINISHED', updated_at = $3, lease_expires_at = NULL,
        wait_reason = NULL, finished_at = $3, result = $4, available_at = NULL,
        attempt_count = gone.attempt, assignment_id = gone.assignment_id, worker = gone.worker,
        leased_at = gone.leased_at
    FROM gone WHERE scans.id = gone.scan_id
    RETURNING id, endpoint_id, attempt_count, attempt_base, scans.assignment_id, scans.worker,
              scans.leased_at
"""
    + HISTORY
    + """), ended AS (
    INSERT INTO ended_scans (finished_at, scan_id) SELECT $3, id FROM closed
"""
    + TOTAL
)

LIVE = {
    "submit": LIVE_SUBMIT,
    "lease": LIVE_DUE
    + """
UPDATE scans SET status = 'PENDING', attempt_count = scans.attempt_count + 1,
    assignment_id = leased.assignment_id, worker = 'w1', leased_at = $2,
    lease_expires_at = $2 + $3, wait_reason = NULL, updated_at = $2
FROM leased WHERE scans.id = leased.scan_id
RETURNING scans.id, scans.assignment_id""",
    "close": LIVE_CLOSE,
}

LEAN = {"submit": LIVE_SUBMIT, "lease": LIVE_DUE + "\nSELECT * FROM leased", "close": LIVE_CLOSE}

LAYOUTS = {"today": TODAY, "live": LIVE, "lean": LEAN}
NARROW = ("live", "lean")


@dataclass(frozen=True)
class Reading:
    """What the cluster wrote so far (bench/dbwork.py) and the loop's backend's CPU."""

    work: DbWork
    cpu_seconds: float


def _read(url: str, backend: psutil.Process) -> Reading:
    work = dbwork.reading(url)
    assert work is not None
    return Reading(work, sum(cpu_seconds([backend]).values()))


def _setup(url: str, layout: str, fillfactor: int) -> int:
    """The layout's tables on a fresh database and the endpoint the loop works for."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO owners (name, created_at) VALUES ('ops', 0);"
            "INSERT INTO endpoints (name, owner_id, open_intake, created_at)"
            " VALUES ('pypi', 1, FALSE, 0)"
        )
        conn.execute(
            "INSERT INTO scan_totals (endpoint_id, outcome, shard, count)"
            " SELECT 1, 'finished', shard, 0 FROM generate_series(0, 31) AS shard"
        )
        conn.execute(f"ALTER TABLE scans SET (fillfactor = {fillfactor})")
        if layout in NARROW:
            for index in MOVED:
                conn.execute(f"DROP INDEX IF EXISTS {index}")
            conn.execute(LIVE_TABLE)
        # The WAL counters are the cluster's: no autovacuum or analysis of these tables adds
        # to a window (the windows start after a VACUUM ANALYZE of their own).
        tables = ["scans", "attempts", "scan_totals"]
        tables += ["live_scans", "ended_scans"] if layout in NARROW else []
        for table in tables:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    return 1


class Loop:
    """One connection running the layout's statements, prepared, one scan at a time."""

    def __init__(self, conn: psycopg.Connection, statements: dict[str, str], endpoint: int):
        self.conn, self.sql, self.endpoint, self.now, self.made = conn, statements, endpoint, 0, 0

    def tick(self) -> int:
        self.now += 1_000
        return self.now

    def submit(self) -> None:
        self.made += 1
        args = (self.endpoint, f"p{self.made}", PAYLOAD, self.tick())
        self.conn.execute(self.sql["submit"], args, prepare=True)

    def cycle(self) -> None:
        leased = self.conn.execute(
            self.sql["lease"], (self.endpoint, self.tick(), LEASE_US), prepare=True
        ).fetchone()
        assert leased is not None, "the queue ran dry"
        shard = (self.now // 1_000) % 32
        closed = self.conn.execute(
            self.sql["close"], (leased[0], leased[1], self.tick(), RESULT, shard), prepare=True
        ).fetchone()
        assert closed is not None, "the close found no lease"


def measure(url: str, layout: str, fillfactor: int, queued: int, scans: int) -> dict[str, float]:
    """The work per scan of a window of submissions, then of as many leases and closes."""
    endpoint = _setup(url, layout, fillfactor)
    with psycopg.connect(url, autocommit=True, cursor_factory=psycopg.RawCursor) as conn:
        loop = Loop(conn, LAYOUTS[layout], endpoint)
        for _ in range(queued + scans // 5):
            loop.submit()
        for _ in range(scans // 5):  # warm-up: plans made, pages in memory
            loop.cycle()
        conn.execute("VACUUM ANALYZE")
        backend = psutil.Process(conn.info.backend_pid)
        marks = [_read(url, backend)]
        for phase in (loop.submit, loop.cycle):
            for _ in range(scans):
                phase()
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT 1")
            marks.append(_read(url, backend))
    intake, work = _figures(marks[0], marks[1], scans), _figures(marks[1], marks[2], scans)
    return {f"intake {k}": v for k, v in intake.items() if "HOT" not in k} | work


def _figures(before: Reading, after: Reading, scans: int) -> dict[str, float]:
    work = after.work - before.work
    per = work.per_scan(scans)
    out = {
        "WAL B/scan": per["wal_bytes"],
        "WAL rec/scan": per["wal_records"],
        "FPI/scan": per["wal_fpi"],
        "PG us/scan": 1e6 * (after.cpu_seconds - before.cpu_seconds) / scans,
    }
    for table in ("scans", "live_scans"):
        tally = work.tables.get(table)
        if tally is not None:
            out[f"{table} HOT %"] = 100 * tally.hot / tally.updated if tally.updated else math.nan
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--layout", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    parser.add_argument("--fillfactor", type=int, nargs="+", default=[100, 70])
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--scans", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--revision", default="head", help="the store's revision to model on")
    args = parser.parse_args()
    stacks = [(layout, ff) for ff in args.fillfactor for layout in args.layout]
    results: dict[tuple[str, int], list[dict[str, float]]] = {stack: [] for stack in stacks}
    for run in range(args.runs):  # every other run in reverse order, as bench.py's rounds
        for layout, ff in stacks if run % 2 == 0 else stacks[::-1]:
            with scratch_database(args.admin, "layouts", args.revision) as url:
                got = measure(url, layout, ff, args.queued, args.scans)
            results[(layout, ff)].append(got)
            shown = "  ".join(f"{k}={v:,.1f}" for k, v in got.items())
            print(f"run {run + 1} {layout:<5} fillfactor={ff:<3} {shown}", flush=True)
    print("medians:")
    for (layout, ff), runs in results.items():
        keys = runs[0].keys()
        shown = "  ".join(f"{k}={statistics.median(r[k] for r in runs):,.1f}" for k in keys)
        print(f"  {layout:<5} fillfactor={ff:<3} {shown}")


if __name__ == "__main__":
    main()

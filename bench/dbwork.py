"""What PostgreSQL did for a window of the benchmark, read before and after it: WAL bytes (by
the WAL position, exact), WAL records and full-page images (`pg_stat_wal`), the checkpoints
begun (`pg_stat_bgwriter`), each table's rows inserted, updated (HOT or not) and deleted
(`pg_stat_user_tables`), the transactions ended and the buffers read (`pg_stat_database`),
and the buffers each table and index read (`pg_statio_user_tables`, `_indexes`): the reads are
a scan's work beside its writes, and say which relation it went to. A page's first change
after a checkpoint is logged with an image of the whole page, so a window soon after a
checkpoint writes more WAL a scan than one long after, whatever the statements do: the images
and the checkpoints are counted so the two are told apart. A backend reports its counts when it
goes idle, at most once a second: a timed window's two readings lag the load alike, so their
difference is the window's work to within a second's worth (a window of several seconds keeps
that small), and a counted one (a fill) is read again once its load has stopped and every
backend has reported. Nothing for SQLite."""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

# The tables a scan's lease and close write: the scan's row, its attempt's history row, the
# outcome totals, and the token whose last use is noted.
HOT_TABLES = ("scans", "attempts", "scan_totals", "tokens")
REPORT_SECONDS = 1.2  # a backend reports its counts at most once a second


@dataclass(frozen=True)
class Tally:
    """One table's rows written: inserted, updated (of them HOT) and deleted."""

    inserted: int = 0
    updated: int = 0
    hot: int = 0
    deleted: int = 0

    def __sub__(self, other: Tally) -> Tally:
        return Tally(
            self.inserted - other.inserted,
            self.updated - other.updated,
            self.hot - other.hot,
            self.deleted - other.deleted,
        )

    @property
    def rows(self) -> int:
        return self.inserted + self.updated + self.deleted


@dataclass(frozen=True)
class DbWork:
    """WAL and rows written, cumulative at a reading or over a window."""

    wal_bytes: int = 0
    wal_records: int = 0
    wal_fpi: int = 0  # full-page images
    checkpoints: int = 0  # begun, timed or requested
    tables: dict[str, Tally] = field(default_factory=dict)
    xacts: int = 0  # transactions ended, committed or rolled back
    buffers: int = 0  # shared buffers read, found in memory or not
    relations: dict[str, int] = field(default_factory=dict)  # buffers read, by table or index

    def __sub__(self, other: DbWork) -> DbWork:
        names = self.tables.keys() | other.tables.keys()
        return DbWork(
            self.wal_bytes - other.wal_bytes,
            self.wal_records - other.wal_records,
            self.wal_fpi - other.wal_fpi,
            self.checkpoints - other.checkpoints,
            {n: self.tables.get(n, Tally()) - other.tables.get(n, Tally()) for n in names},
            self.xacts - other.xacts,
            self.buffers - other.buffers,
            {
                n: self.relations.get(n, 0) - other.relations.get(n, 0)
                for n in self.relations.keys() | other.relations.keys()
            },
        )

    def per_scan(self, scans: int) -> dict[str, float]:
        """The window's work per scan: WAL bytes, records and full-page images, rows written,
        the share of the scans table's updates that were HOT, transactions and buffers read
        (NaN where nothing was measured)."""
        if scans <= 0:
            keys = ("wal_bytes", "wal_records", "wal_fpi", "rows", "hot", "xacts", "buffers")
            return {key: float("nan") for key in keys}
        scans_table = self.tables.get("scans", Tally())
        return {
            "wal_bytes": self.wal_bytes / scans,
            "wal_records": self.wal_records / scans,
            "wal_fpi": self.wal_fpi / scans,
            "rows": sum(t.rows for t in self.tables.values()) / scans,
            "hot": scans_table.hot / scans_table.updated if scans_table.updated else float("nan"),
            "xacts": self.xacts / scans,
            "buffers": self.buffers / scans,
        }

    def busiest(self, scans: int, count: int = 4) -> dict[str, float]:
        """The `count` tables and indexes read most, with their buffers read a scan."""
        ranked = sorted(self.relations.items(), key=lambda item: -item[1])[:count]
        return {name: read / scans for name, read in ranked if read > 0 and scans > 0}

    def hot_shares(self) -> dict[str, float]:
        """The share of each hot table's updates that were HOT."""
        return {
            name: tally.hot / tally.updated
            for name in HOT_TABLES
            if (tally := self.tables.get(name)) is not None and tally.updated
        }


def reading(database_url: str) -> DbWork | None:
    """The database's cumulative counts now (None for SQLite)."""
    if not database_url.startswith("postgresql"):
        return None
    with psycopg.connect(database_url, autocommit=True) as conn:
        wal = conn.execute(
            "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, wal_records, wal_fpi,"
            " (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter) FROM pg_stat_wal"
        ).fetchone()
        rows = conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del "
            "FROM pg_stat_user_tables"
        ).fetchall()
        db = conn.execute(
            "SELECT xact_commit + xact_rollback, blks_hit + blks_read FROM pg_stat_database"
            " WHERE datname = current_database()"
        ).fetchone()
        read = conn.execute(
            "SELECT relname, heap_blks_hit + heap_blks_read FROM pg_statio_user_tables"
            " UNION ALL SELECT indexrelname, idx_blks_hit + idx_blks_read"
            " FROM pg_statio_user_indexes"
        ).fetchall()
    assert wal is not None and db is not None
    tables = {str(name): Tally(int(i), int(u), int(h), int(d)) for name, i, u, h, d in rows}
    relations = {str(name): int(n or 0) for name, n in read}
    return DbWork(
        int(wal[0]), int(wal[1]), int(wal[2]), int(wal[3]), tables, int(db[0]), int(db[1]),
        relations,
    )  # fmt: skip


def checkpoint(database_url: str) -> None:
    """A checkpoint now, so the window that follows starts as far from one as every other
    window does (nothing for SQLite, which checkpoints its WAL every thousand pages)."""
    if database_url.startswith("postgresql"):
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")

"""The throughput floors, read from the median rows of one report: PostgreSQL beside SQLite
figure by figure, the worker loop beside its HTTP ceiling, and more server processes beside
one. Every check names its figure, the measured value and whether it is met.

Rows are the dicts of `report.medians` (one per database, server count, figure and queue
size). Figures are paired by figure and queue size; the fill steps, whose sizes differ from
one database to the other, are paired as the median over all their steps.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]

# PostgreSQL's scans/s at least this share of SQLite's, in every figure.
PG_RATE_FLOOR = 0.75
# PostgreSQL's server CPU per scan at most this multiple of SQLite's, in every figure.
PG_CPU_LIMIT = 1.5
# Scans per ceiling request (scans/s over GET /healthz req/s) of the complete-and-fetch loop,
# by lease batch.
LOOP_FLOORS = {1: 0.6, 10: 3.0}
# N server processes on one PostgreSQL database serve at least what one does.
SERVERS_FLOOR = 1.0
# The same servers through PgBouncer serve as much of their ceiling as reaching PostgreSQL
# directly (each run's own ceiling: the pooler is measured, not the machine's mood).
POOLER_FLOOR = 1.0
_LOOP = re.compile(r"^loop b(\d+)$")  # the complete-and-fetch loop; not its no-fetch "before"


@dataclass(frozen=True)
class Pair:
    """One figure on two stacks: `left` is measured against `right`."""

    figure: str
    queued: str
    left: Row
    right: Row

    def ratio(self, key: str) -> float:
        return _ratio(float(self.left[key]), float(self.right[key]))


@dataclass(frozen=True)
class Check:
    floor: str
    figure: str
    measured: str
    met: bool | None  # None: not measured in this report


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def _workers(label: str) -> str:
    """The `--server-workers` part of a server label ("1x2w" -> "x2w"), "" without it."""
    return _direct(label).lstrip("0123456789")


def _direct(label: str) -> str:
    """The label without its pooler ("1@transaction" -> "1")."""
    return label.partition("@")[0]


def _pooled(label: str) -> bool:
    return "@" in label


def _count(label: str) -> int:
    digits = re.match(r"\d+", label)
    return int(digits.group()) if digits else 0


def _steps(rows: list[Row]) -> Row:
    """The median row of a figure's fill steps."""
    merged = dict(rows[0])
    for key, value in merged.items():
        if isinstance(value, int | float) and key != "target":
            merged[key] = statistics.median(float(r[key]) for r in rows)
    return merged


def pair(left: list[Row], right: list[Row]) -> list[Pair]:
    """Rows of the same figure at the same size; a figure whose sizes differ (the fill steps)
    pairs the medians over its steps."""
    by_key = {(r["figure"], r["target"]): r for r in right}
    pairs, unmatched = [], []
    for row in left:
        other = by_key.get((row["figure"], row["target"]))
        if other is None:
            unmatched.append(row)
        else:
            pairs.append(Pair(row["figure"], f"{row['target']:,} queued", row, other))
    paired = {(p.figure, p.right["target"]) for p in pairs}
    for figure in dict.fromkeys(r["figure"] for r in unmatched):
        mine = [r for r in unmatched if r["figure"] == figure]
        theirs = [r for r in right if r["figure"] == figure and (figure, r["target"]) not in paired]
        if theirs:
            pairs.append(Pair(figure, "all fill steps", _steps(mine), _steps(theirs)))
    return pairs


def pg_over_sqlite(rows: list[Row]) -> list[Pair]:
    """Every PostgreSQL figure (each server count) beside SQLite's in the same report."""
    pairs = []
    labels = {r["servers"] for r in rows if r["db"] == "postgresql" and not _pooled(r["servers"])}
    for label in sorted(labels, key=_count):
        pg = [r for r in rows if r["db"] == "postgresql" and r["servers"] == label]
        sqlite = [
            r for r in rows if r["db"] == "sqlite" and _workers(r["servers"]) == _workers(label)
        ]
        pairs += pair(pg, sqlite)
    return pairs


def servers_over_one(rows: list[Row]) -> list[Pair]:
    """Every PostgreSQL figure at N > 1 server processes beside the same at one."""
    pg = [r for r in rows if r["db"] == "postgresql" and not _pooled(r["servers"])]
    pairs = []
    for label in sorted({r["servers"] for r in pg if _count(r["servers"]) > 1}, key=_count):
        one = [r for r in pg if r["servers"] == "1" + _workers(label)]
        pairs += pair([r for r in pg if r["servers"] == label], one)
    return pairs


def pooled_over_direct(rows: list[Row]) -> list[Pair]:
    """Every PostgreSQL figure through PgBouncer beside the same servers reaching it directly."""
    pg = [r for r in rows if r["db"] == "postgresql"]
    pairs = []
    for label in sorted({r["servers"] for r in pg if _pooled(r["servers"])}):
        direct = [r for r in pg if r["servers"] == _direct(label)]
        pairs += pair([r for r in pg if r["servers"] == label], direct)
    return pairs


def _where(p: Pair) -> str:
    return f"{p.figure}, {p.queued}, PG {p.left['servers']} srv"


def _pair_checks(
    name: str, pairs: list[Pair], key: str, good: Callable[[float], bool], fmt: str, missing: str
) -> list[Check]:
    if not pairs:
        return [Check(name, "-", f"not measured: {missing}", None)]
    checks = []
    for p in pairs:
        value = p.ratio(key)
        a, b = fmt.format(p.left[key]), fmt.format(p.right[key])
        checks.append(Check(name, _where(p), f"{a} / {b} = {value:.2f}", good(value)))
    return checks


def _loop_checks(rows: list[Row]) -> list[Check]:
    checks = []
    for batch, floor in LOOP_FLOORS.items():
        name = f"batch {batch}: scans per ceiling request >= {floor:g}"
        mine = [r for r in rows if (m := _LOOP.match(r["figure"])) and int(m.group(1)) == batch]
        if not mine:
            checks.append(Check(name, "-", f"not measured: no `loop b{batch}` figure", None))
        for r in mine:
            where = f"{r['figure']}, {r['target']:,} queued, {r['db']} {r['servers']} srv"
            value = float(r["scans_vs_ceiling"])
            checks.append(Check(name, where, f"{value:.2f}", value >= floor))
    return checks


def checks(rows: list[Row]) -> list[Check]:
    """Every floor against the median rows of a report."""
    pg_sqlite = pg_over_sqlite(rows)
    both = "needs --db both (or report.py over both databases' JSON)"
    found = _pair_checks(
        f"PostgreSQL scans/s >= {PG_RATE_FLOOR:g} x SQLite's",
        pg_sqlite,
        "scans_per_s",
        lambda v: v >= PG_RATE_FLOOR,
        "{:,.0f}",
        both,
    )
    found += _pair_checks(
        f"PostgreSQL server µs/scan <= {PG_CPU_LIMIT:g} x SQLite's",
        pg_sqlite,
        "server_us_per_scan",
        lambda v: v <= PG_CPU_LIMIT,
        "{:,.0f}",
        both,
    )
    found += _loop_checks(rows)
    found += _pair_checks(
        f"PostgreSQL, N server processes: scans/s >= {SERVERS_FLOOR:g} x one's",
        servers_over_one(rows),
        "scans_per_s",
        lambda v: v >= SERVERS_FLOOR,
        "{:,.0f}",
        "needs --servers 1 N on PostgreSQL",
    )
    found += _pair_checks(
        f"PostgreSQL through PgBouncer: scans/ceiling >= {POOLER_FLOOR:g} x direct",
        pooled_over_direct(rows),
        "scans_vs_ceiling",
        lambda v: v >= POOLER_FLOOR,
        "{:.2f}",
        "needs --pooler none transaction (or session) on PostgreSQL",
    )
    return found


def comparison_lines(rows: list[Row]) -> list[str]:
    """A Markdown table: per figure, PostgreSQL's figures over SQLite's in the same report."""
    pairs = pg_over_sqlite(rows)
    if not pairs:
        return []
    lines = [
        "| figure | at | PG srv | PG scans/s | SQLite scans/s | PG / SQLite "
        "| PG µs/scan | SQLite µs/scan | PG / SQLite | scans/ceil PG / SQLite | PG CPU % |",
        "|" + "|".join(" --- " for _ in range(11)) + "|",
    ]
    for p in pairs:
        pg, lite = p.left, p.right
        lines.append(
            f"| {p.figure} | {p.queued} | {pg['servers']} | {pg['scans_per_s']:,.0f} "
            f"| {lite['scans_per_s']:,.0f} | {p.ratio('scans_per_s'):.2f} "
            f"| {pg['server_us_per_scan']:,.0f} | {lite['server_us_per_scan']:,.0f} "
            f"| {p.ratio('server_us_per_scan'):.2f} | {p.ratio('scans_vs_ceiling'):.2f} "
            f"| {pg['pg_cpu_pct']:.0f} |"
        )
    return lines


def floor_lines(rows: list[Row]) -> list[str]:
    """A Markdown table of every check, then how many were met."""
    found = checks(rows)
    lines = ["| floor | figure | measured | verdict |", "| --- | --- | --- | --- |"]
    for c in found:
        verdict = "-" if c.met is None else ("met" if c.met else "NOT MET")
        lines.append(f"| {c.floor} | {c.figure} | {c.measured} | {verdict} |")
    judged = [c for c in found if c.met is not None]
    met = sum(1 for c in judged if c.met)
    lines.append("")
    lines.append(f"{met} of {len(judged)} checks met (medians of the runs).")
    return lines

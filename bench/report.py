"""Figures: one row per measurement, each beside the HTTP ceiling measured just before it;
medians of the runs; the intake ratio (rate at N queued / rate at 0); PostgreSQL over
SQLite and the floors (`floors.py`).

Run alone, it prints the tables again from the `--json` files of one or more runs (e.g. a
SQLite run and a PostgreSQL `--servers 1 3` run, to read them side by side):

    python bench/report.py /tmp/bench-sqlite.json /tmp/bench-pg.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import floors
from load import LoadStats
from measure import Window

MIB = 1024 * 1024


@dataclass
class Figure:
    db: str
    servers: str  # server processes: "2", or "1x4w" for one `serve --workers 4`
    figure: str  # intake, bulk intake, loop b1, loop b10 …
    target: int  # the queue size this figure is taken at (what medians group by)
    queued: int  # QUEUED scans at its start, as `mainframe stats` counted them
    run: int
    in_flight: int  # concurrent requests (workers for the loop)
    scans_per_s: float
    requests_per_s: float
    requests_per_scan: float  # 2 for the two-request loop at batch 1, 1 with complete-and-fetch
    ceiling_rps: float  # GET /healthz at the same concurrency, same servers, just before
    ceiling_server_cpu_pct: float  # what limits the ceiling: the servers or the client
    ceiling_client_cpu_pct: float
    scans_vs_ceiling: float
    requests_vs_ceiling: float
    p50_ms: float  # the request (the poll, for the loop)
    p99_ms: float
    result_p99_ms: float  # the loop's result reports
    server_cpu_pct: float
    server_us_per_scan: float
    server_peak_rss_mib: float
    client_cpu_pct: float
    pg_cpu_pct: float
    pg_us_per_scan: float  # the PostgreSQL backends' CPU per scan (what pgqueuer also pays)
    wal_bytes_per_scan: float  # PostgreSQL's WAL written per scan (bench/dbwork.py)
    wal_records_per_scan: float
    wal_fpi_per_scan: float  # full-page images per scan: a page's first change after a checkpoint
    checkpoints: float  # begun in the window: each makes the next change of every page an image
    rows_per_scan: float  # rows inserted, updated and deleted per scan, every table
    scans_hot_share: float  # of the scans table's updates, the share that were HOT
    xacts_per_scan: float  # PostgreSQL transactions ended per scan
    buffers_per_scan: float  # shared buffers read per scan (bench/dbwork.py)
    other_cpu_pct: float
    refused: int  # responses (or batch items) that were not the expected success
    errors: int  # transport errors and timeouts
    check: str
    note: str = ""
    # The machine's context switches per scan (a JSON file from before it was counted: nan).
    switches_per_scan: float = float("nan")


def per_item_us(cpu_pct: float, per_second: float) -> float:
    """CPU in % of one core, per item at `per_second` items a second, in microseconds."""
    return cpu_pct * 1e4 / per_second if per_second else float("nan")


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def refused(stats: LoadStats, ok: tuple[set[int], set[int]]) -> int:
    """Responses outside ok[0] and batch items outside ok[1] (transport errors are apart)."""
    requests_ok, items_ok = ok
    bad = sum(n for status, n in stats.statuses.items() if status not in requests_ok | {0})
    return bad + sum(n for status, n in stats.item_statuses.items() if status not in items_ok)


def figure(
    *,
    stack_db: str,
    servers: str,
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
    stats, seconds = window.stats, window.seconds
    scans = stats.items / seconds
    nan = float("nan")
    written = window.db.per_scan(stats.items) if window.db else {}
    requests = stats.requests / seconds
    ceiling_rps = ceiling.stats.requests / ceiling.seconds
    return Figure(
        db=stack_db,
        servers=servers,
        figure=name,
        target=target,
        queued=queued,
        run=run,
        in_flight=in_flight,
        scans_per_s=scans,
        requests_per_s=requests,
        requests_per_scan=requests / scans if scans else float("nan"),
        ceiling_rps=ceiling_rps,
        ceiling_server_cpu_pct=ceiling.cpu["servers"],
        ceiling_client_cpu_pct=ceiling.cpu["clients"],
        scans_vs_ceiling=scans / ceiling_rps if ceiling_rps else float("nan"),
        requests_vs_ceiling=requests / ceiling_rps if ceiling_rps else float("nan"),
        p50_ms=quantile(stats.latency_ms, 0.50),
        p99_ms=quantile(stats.latency_ms, 0.99),
        result_p99_ms=quantile(stats.result_ms, 0.99),
        server_cpu_pct=window.cpu["servers"],
        server_us_per_scan=per_item_us(window.cpu["servers"], scans),
        server_peak_rss_mib=window.peak_rss / MIB,
        client_cpu_pct=window.cpu["clients"],
        pg_cpu_pct=window.cpu["pg"],
        pg_us_per_scan=per_item_us(window.cpu["pg"], scans),
        wal_bytes_per_scan=written.get("wal_bytes", nan),
        wal_records_per_scan=written.get("wal_records", nan),
        wal_fpi_per_scan=written.get("wal_fpi", nan),
        checkpoints=window.db.checkpoints if window.db else nan,
        rows_per_scan=written.get("rows", nan),
        scans_hot_share=written.get("hot", nan),
        xacts_per_scan=written.get("xacts", nan),
        buffers_per_scan=written.get("buffers", nan),
        other_cpu_pct=window.cpu["other"],
        refused=refused(stats, ok),
        errors=stats.errors,
        check=check,
        note=note,
        switches_per_scan=window.switches_per_s / scans if scans else nan,
    )


COLUMNS = (
    ("db", "db", "{}"),
    ("srv", "servers", "{}"),
    ("figure", "figure", "{}"),
    ("queued", "queued", "{:,.0f}"),
    ("run", "run", "{}"),
    ("in flight", "in_flight", "{}"),
    ("scans/s", "scans_per_s", "{:,.0f}"),
    ("req/s", "requests_per_s", "{:,.0f}"),
    ("req/scan", "requests_per_scan", "{:.2f}"),
    ("ceiling req/s", "ceiling_rps", "{:,.0f}"),
    ("ceil srv CPU %", "ceiling_server_cpu_pct", "{:.0f}"),
    ("ceil cli CPU %", "ceiling_client_cpu_pct", "{:.0f}"),
    ("scans/ceil", "scans_vs_ceiling", "{:.2f}"),
    ("req/ceil", "requests_vs_ceiling", "{:.2f}"),
    ("p50 ms", "p50_ms", "{:.1f}"),
    ("p99 ms", "p99_ms", "{:.1f}"),
    ("result p99 ms", "result_p99_ms", "{:.1f}"),
    ("server CPU %", "server_cpu_pct", "{:.0f}"),
    ("µs/scan", "server_us_per_scan", "{:,.0f}"),
    ("RSS MiB", "server_peak_rss_mib", "{:.0f}"),
    ("client CPU %", "client_cpu_pct", "{:.0f}"),
    ("PG CPU %", "pg_cpu_pct", "{:.0f}"),
    ("PG µs/scan", "pg_us_per_scan", "{:,.0f}"),
    ("WAL B/scan", "wal_bytes_per_scan", "{:,.0f}"),
    ("WAL rec/scan", "wal_records_per_scan", "{:.1f}"),
    ("FPI/scan", "wal_fpi_per_scan", "{:.3f}"),
    ("ckpts", "checkpoints", "{:.0f}"),
    ("rows/scan", "rows_per_scan", "{:.1f}"),
    ("scans HOT", "scans_hot_share", "{:.0%}"),
    ("xacts/scan", "xacts_per_scan", "{:.2f}"),
    ("buffers/scan", "buffers_per_scan", "{:.0f}"),
    ("other CPU %", "other_cpu_pct", "{:.0f}"),
    ("switches/scan", "switches_per_scan", "{:.1f}"),
    ("refused", "refused", "{:.0f}"),
    ("errors", "errors", "{:.0f}"),
    ("check", "check", "{}"),
)


def cells(row: dict[str, Any]) -> list[str]:
    return [fmt.format(row[key]) for _, key, fmt in COLUMNS]


def print_figure(fig: Figure) -> None:
    row = asdict(fig)
    pairs = [f"{name}={cell}" for (name, _, _), cell in zip(COLUMNS, cells(row), strict=True)]
    print("  ".join(pairs) + (f"  note: {fig.note}" if fig.note else ""), flush=True)


def medians(figures: list[Figure]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str, int], list[Figure]] = {}
    for fig in figures:
        groups.setdefault((fig.db, fig.servers, fig.figure, fig.target), []).append(fig)
    rows = []
    for group in groups.values():
        row = asdict(group[0])
        row["run"] = f"median of {len(group)}" if len(group) > 1 else "1"
        for key, value in row.items():
            if isinstance(value, int | float) and key not in ("target", "in_flight"):
                row[key] = statistics.median(getattr(f, key) for f in group)
        checks = {f.check for f in group}
        row["check"] = "ok" if checks == {"ok"} else "; ".join(sorted(checks))
        rows.append(row)
    return rows


def intake_ratios(figures: list[Figure]) -> list[str]:
    """The intake target: the rate at the largest size within 20 % of the rate at 0 (a growing
    queue must not slow intake down; bench/README.md, Intake as the queue grows)."""
    lines = []
    rows = [r for r in medians(figures) if r["figure"] == "intake"]
    for db, servers in sorted({(r["db"], r["servers"]) for r in rows}):
        mine = sorted((r for r in rows if (r["db"], r["servers"]) == (db, servers)), key=_target)
        if len(mine) < 2 or mine[0]["target"] != 0:
            continue
        empty, full = mine[0], mine[-1]
        ratio = full["scans_per_s"] / empty["scans_per_s"] if empty["scans_per_s"] else 0.0
        vs_ceiling = _ratio(full["scans_vs_ceiling"], empty["scans_vs_ceiling"])
        verdict = "meets" if ratio >= 0.8 else "misses"
        lines.append(
            f"{db} ({servers} srv): intake {empty['scans_per_s']:,.0f}/s at 0 queued, "
            f"{full['scans_per_s']:,.0f}/s at {full['target']:,}: ratio {ratio:.2f} "
            f"(of the ceiling: {vs_ceiling:.2f}); {verdict} the target of >= 0.80"
        )
    return lines


def _target(row: dict[str, Any]) -> int:
    return int(row["target"])


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def aligned(headers: list[str], table: list[list[str]]) -> list[str]:
    """A plain-text table, columns right-aligned."""
    widths = [max(len(h), *(len(c[i]) for c in table)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in table]
    return lines


def markdown(headers: list[str], table: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    return lines + ["| " + " | ".join(line) + " |" for line in table]


def print_tables(figures: list[Figure], notes: list[str]) -> None:
    rows = medians(figures)
    if not rows:
        print("\nno figures", flush=True)
        return
    headers = [name for name, _, _ in COLUMNS]
    table = [cells(row) for row in rows]
    print("\n## Medians\n")
    print("\n".join(aligned(headers, table)))
    print("\n## Markdown\n")
    print("\n".join(markdown(headers, table)))
    ratios = intake_ratios(figures)
    if ratios:
        print("\n## Intake as the queue grows\n")
        for ratio in ratios:
            print(f"- {ratio}")
    comparison = floors.comparison_lines(rows)
    if comparison:
        print("\n## PostgreSQL over SQLite\n")
        print("\n".join(comparison))
    print("\n## Floors\n")
    print("\n".join(floors.floor_lines(rows)))
    if notes:
        print("\n## Notes\n")
        for note in dict.fromkeys(notes):
            print(f"- {note}")
    sys.stdout.flush()


def load_figures(path: Path) -> list[Figure]:
    """The figures of a `--json` file; a column that file predates reads as NaN."""
    names = {f.name for f in fields(Figure)}
    figures = []
    for raw in json.loads(path.read_text()):
        row: dict[str, Any] = {name: float("nan") for name in names if name != "note"}
        row.update((k, v) for k, v in raw.items() if k in names)
        figures.append(Figure(**row))
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print the tables of bench.py --json files.")
    parser.add_argument("json", type=Path, nargs="+", help="files written by bench.py --json")
    args = parser.parse_args(argv)
    print_tables([fig for path in args.json for fig in load_figures(path)], notes=[])


if __name__ == "__main__":
    main()

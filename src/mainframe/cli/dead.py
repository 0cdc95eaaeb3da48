"""`mainframe dead`: list, open and redrive an owner's dead letters on the database itself,
like the other operator commands. A table on a terminal, plain lines otherwise, JSON for
scripts; a redrive asks for confirmation with the count and shows progress."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
import typer

from mainframe import effects
from mainframe.cli.common import (
    DatabaseOpt,
    OwnerOpt,
    load_settings,
    ready_schema,
    resolve_owner,
)
from mainframe.cli.failures import refuse
from mainframe.cli.shell import REFUSED, USAGE, fail
from mainframe.clock import rfc3339, to_us
from mainframe.contract.operator_schemas import CAUSE_KEY
from mainframe.contract.text import (
    counted,
    last_error,
    one_line,
    printable,
    reason_words,
    shown,
    status_word,
)
from mainframe.lifecycle.causes import Cause
from mainframe.lifecycle.rules import DeadLetterReason
from mainframe.metrics import Metrics
from mainframe.shapes import operator as operator_shapes
from mainframe.shapes import scans as shapes
from mainframe.store import (
    CLI,
    CausePage,
    DeadLetterFilter,
    DeadLetterPage,
    Progress,
    Redriven,
    ScanRecord,
    Store,
    StoreError,
    UnknownName,
    open_store,
)

dead_app = typer.Typer(
    no_args_is_help=True, help="Dead letters: list, show, redrive.", rich_markup_mode=None
)

CAUSE = re.compile(CAUSE_KEY)
QOpt = Annotated[
    str | None, typer.Option("--q", help="Substring of name, source or kind, or a scan id.")
]
EndpointOpt = Annotated[str | None, typer.Option("--endpoint", help="Only this endpoint.")]
QueueOpt = Annotated[str | None, typer.Option("--queue", help="Only this queue.")]
ReasonOpt = Annotated[DeadLetterReason | None, typer.Option("--reason", help="Only this reason.")]
CauseOpt = Annotated[
    str | None, typer.Option("--cause", help="Only this cause (a key `dead causes` lists).")
]
SinceOpt = Annotated[
    datetime | None,
    typer.Option("--since", help="Dead-lettered at or after (UTC).", formats=["%Y-%m-%dT%H:%M:%S"]),
]


@asynccontextmanager
async def _opened(database_url: str | None, owner: str | None) -> AsyncIterator[tuple[Store, int]]:
    """The store on the configured database and the owner's id, closed on the way out."""

    settings = load_settings(database_url=database_url)
    ready_schema(settings)
    store = open_store(settings)
    # Logs and counters as the server has them (scans_redriven); hooks are the server's.
    store.db.publish = effects.wire(Metrics())
    try:
        try:
            owner_id = await store.owners.owner_id(await resolve_owner(store, owner))
        except UnknownName as exc:
            refuse(exc)
        yield store, owner_id
    finally:
        await store.close()


def _filter(
    q: str | None,
    endpoint: str | None,
    queue: str | None,
    reason: DeadLetterReason | None,
    since: datetime | None,
    cause: str | None = None,
) -> DeadLetterFilter:

    if not all(printable(v) for v in (q or "", endpoint or "", queue or "")):
        fail("filters take no control characters", USAGE)
    if cause is not None and not CAUSE.fullmatch(cause):
        fail(
            "--cause takes a cause's key: 16 hex digits, as `mainframe dead causes` lists them",
            USAGE,
        )
    # --since is read as UTC, the only zone the server stores.
    since_us = None if since is None else to_us(since.replace(tzinfo=UTC).timestamp())
    reason_value = reason.value if reason else None
    return DeadLetterFilter(q or None, reason_value, since_us, endpoint, queue, cause)


# The columns of the listing: a header word and how a row's value is read.
COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], object]], ...] = (
    ("ID", lambda row: row["scan_id"]),
    ("DEAD-LETTERED", lambda row: row["dead_lettered_at"]),
    ("ENDPOINT", lambda row: row["endpoint"]),
    ("QUEUE", lambda row: row["queue"]),
    ("REASON", lambda row: reason_words(row["fail_reason"])),
    ("NAME", lambda row: row["name"]),
    ("VERSION", lambda row: row["version"]),
    ("LAST ERROR", lambda row: last_error((row["final_attempt"] or {}).get("summary")) or None),
)


def _cell(value: object) -> str:
    # Sender text may hold tabs, newlines, bidi overrides and zero-width characters: none
    # may break a row or pass one name off as another, so each shows as a [U+XXXX] marker.
    return "-" if value is None else one_line(str(value)[:1000])


def _json(body: object) -> str:
    return orjson.dumps(body).decode()


def _field(value: object) -> str:
    return "-" if value is None else shown(value)


def _table(rows: list[dict[str, Any]], count: int, of: str = "") -> None:
    """A table on a terminal; otherwise a header and tab-separated rows, for `cut` and `awk`.
    `of` says what the rows are of (one cause), after their count."""
    if not sys.stdout.isatty():
        typer.echo("\t".join(header for header, _ in COLUMNS))
        for row in rows:
            typer.echo("\t".join(_cell(read(row)) for _, read in COLUMNS))
        typer.echo(f"{len(rows)} shown of {counted(count, 'dead letter')}{of}")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=counted(count, "dead letter") + of, title_justify="left")
    for header, _ in COLUMNS:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(read(row)) for _, read in COLUMNS))
    # markup=False: sender text is shown as written, never read as rich markup.
    Console(markup=False, highlight=False).print(table)


@dead_app.command("list")
def dead_list(
    owner: OwnerOpt = None,
    q: QOpt = None,
    endpoint: EndpointOpt = None,
    queue: QueueOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    cause: CauseOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Rows to show.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    database_url: DatabaseOpt = None,
) -> None:
    """The owner's dead letters, newest first, with how many match in all."""
    f = _filter(q, endpoint, queue, reason, since, cause)

    async def listed() -> tuple[DeadLetterPage, str | None]:
        async with _opened(database_url, owner) as (store, owner_id):
            pattern = None if cause is None else await store.causes.pattern(cause)
            return await store.dead_letters.page(owner_id, f, after=None, limit=limit), pattern

    page, pattern = asyncio.run(listed())
    rows = [operator_shapes.dead_letter(item).model_dump(mode="json") for item in page.items]
    if as_json:
        typer.echo(_json({"scans": rows, "count": page.count}))
        return
    # A cause is named by its pattern, as the causes view shows it; its key says nothing.
    of = "" if cause is None else f" of cause {_cause_words(cause, pattern)}"
    _table(rows, page.count, of)


def _cause_words(key: str, pattern: str | None) -> str:
    return f"{key} (no failure has had it)" if pattern is None else f"“{one_line(pattern)}”"


@dead_app.command("causes")
def dead_causes(
    owner: OwnerOpt = None,
    endpoint: EndpointOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Causes to show.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    database_url: DatabaseOpt = None,
) -> None:
    """The owner's dead letters grouped by cause, newest last seen first: each cause's key
    (for --cause), how many dead letters it holds, when it was last seen, and its pattern."""

    async def listed() -> CausePage:
        async with _opened(database_url, owner) as (store, owner_id):
            return await store.causes.page(owner_id, endpoint=endpoint, after=None, limit=limit)

    page = operator_shapes.cause_page(asyncio.run(listed())).model_dump(mode="json")
    if as_json:
        typer.echo(_json(page))
        return
    causes = page["causes"]
    typer.echo(f"{'CAUSE':<16}  {'DEAD':>6}  {'LAST SEEN':<27}  PATTERN")
    for c in causes:
        typer.echo(
            f"{c['cause']:<16}  {c['count']:>6}  {c['last_seen_at']:<27}  {_cell(c['pattern'])}"
        )
    if not causes:
        typer.echo("no dead letters, so no causes")


@dead_app.command("show")
def dead_show(
    scan_id: int,
    owner: OwnerOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    database_url: DatabaseOpt = None,
) -> None:
    """One scan with its whole attempt history."""

    async def opened() -> tuple[ScanRecord, Cause | None]:
        async with _opened(database_url, owner) as (store, owner_id):
            scan = await store.dead_letters.get(owner_id, scan_id)
            return scan, (await store.causes.of_scans(owner_id, [scan_id])).get(scan_id)

    try:
        scan, cause = asyncio.run(opened())
    except StoreError as exc:
        refuse(exc)
    body = shapes.scan(scan, with_attempts=True).model_dump(mode="json")
    named = operator_shapes.cause_name(cause)
    body["cause"] = None if named is None else named.model_dump(mode="json")
    if as_json:
        typer.echo(_json(body))
        return
    _show(body, scan)


def _show(body: dict[str, Any], scan: ScanRecord) -> None:
    """The scan as labelled lines, sender text with hidden characters made visible."""
    for key in ("scan_id", "name", "version", "endpoint", "queue", "kind", "source"):
        typer.echo(f"{key:<18} {_field(body[key])}")
    typer.echo(f"{'status':<18} {status_word(body['status'], body['dead_lettered_at'])}")
    typer.echo(f"{'reason':<18} {reason_words(body['fail_reason']) or '-'}")
    cause = body["cause"]
    if cause is not None:
        typer.echo(f"{'cause':<18} “{shown(cause['pattern'])}” ({cause['cause']})")
    for key in ("dead_lettered_at", "attempt_count"):
        typer.echo(f"{key:<18} {_field(body[key])}")
    last = "" if scan.redriven_at is None else f", last {rfc3339(scan.redriven_at)}"
    typer.echo(f"{'redriven':<18} {scan.redrive_count} times{last}")
    payload = body.get("payload")
    typer.echo(f"{'payload':<18} {'-' if payload is None else shown(_json(payload))}")
    typer.echo("attempts:")
    for a in body["attempts"]:
        typer.echo(
            f"  #{a['seq']:<3} {a['outcome'] or 'open':<18} worker={_field(a['worker'])} "
            f"leased={_field(a['leased_at'])} closed={_field(a['closed_at'])}"
        )
        for label in ("summary", "artifact"):
            if a[label]:
                typer.echo(_indented(f"       {label}: ", shown(a[label])))


def _indented(label: str, text: str) -> str:
    """`text` after `label`, its later lines indented to where the first one starts."""
    first, *rest = text.splitlines() or [""]
    pad = "\n" + " " * len(label)
    return label + first + "".join(pad + line for line in rest)


@dead_app.command("redrive")
def dead_redrive(
    owner: OwnerOpt = None,
    scan_ids: Annotated[list[int] | None, typer.Argument(help="Scan ids to redrive.")] = None,
    q: QOpt = None,
    endpoint: EndpointOpt = None,
    queue: QueueOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    cause: CauseOpt = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    database_url: DatabaseOpt = None,
) -> None:
    """Requeue dead letters with a fresh budget: SCAN_ID... or every match of the filter
    options (asks first, stating the count). Exits 1 when a scan asked for was skipped (an
    unknown id, one not dead-lettered...), naming it and why on stderr, as when nothing
    matches."""
    from mainframe.client.progress import progress_bar

    by_filter = any(v is not None for v in (q, endpoint, queue, reason, since, cause))
    if bool(scan_ids) == by_filter:
        fail(
            "give SCAN_ID... or filter options "
            "(--q, --endpoint, --queue, --reason, --since, --cause)",
            USAGE,
        )
    f = _filter(q, endpoint, queue, reason, since, cause)

    async def redriven() -> Redriven:
        async with _opened(database_url, owner) as (store, owner_id):
            if scan_ids:
                count = len(set(scan_ids))
            else:
                count = await store.dead_letters.redrivable(owner_id, f)
            if count == 0:
                fail("nothing matches; nothing redriven", REFUSED)
            if not yes and not typer.confirm(f"Redrive {counted(count, 'dead letter')}?"):
                typer.echo("nothing redriven")
                raise typer.Exit(0)
            with progress_bar("redriving", total=count) as advance:
                seen = [0]

                def step(done: int, _total: int) -> None:
                    advance(done - seen[0])
                    seen[0] = done

                return await _redrive(store, owner_id, scan_ids, f, count, step)

    done = asyncio.run(redriven())
    for skipped in done.skipped[:50]:
        typer.echo(f"skipped {skipped.scan_id}: {skipped.reason}", err=True)
    typer.echo(f"redriven {done.redriven}, skipped {len(done.skipped)}")
    if done.skipped:
        raise typer.Exit(REFUSED)  # like `rm A B` without B: the rest is done, the miss is told


async def _redrive(
    store: Store,
    owner_id: int,
    scan_ids: list[int] | None,
    f: DeadLetterFilter,
    count: int,
    step: Progress,
) -> Redriven:

    try:
        if scan_ids:
            return await store.dead_letters.redrive_ids(
                owner_id, scan_ids, origin=CLI, progress=step
            )
        return await store.dead_letters.redrive_filter(
            owner_id, f, confirm=count, origin=CLI, progress=step
        )
    except StoreError as exc:
        refuse(exc)

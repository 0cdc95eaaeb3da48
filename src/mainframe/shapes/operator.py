"""Operator records as the contract's replies (each function builds the model a route
returns), and the dead-letter listing's cursor."""

from __future__ import annotations

from typing import cast

from mainframe.clock import rfc3339
from mainframe.contract.hook_schemas import DeliveryStats
from mainframe.contract.operator_schemas import (
    AuditPage,
    AuditPublic,
    CauseNamePublic,
    CausePublic,
    DeadLetterPublic,
    EndpointCardPublic,
    EndpointDetail,
    EndpointPublic,
    FacetPublic,
    FinalAttemptPublic,
    HookHealthPublic,
    HourPublic,
    Origin,
    OverviewPublic,
    PausedQueuePublic,
    QueueChangePublic,
    RedrivePublic,
    RevokedPublic,
    SkippedPublic,
    TokenPublic,
    WorkerPublic,
    WorkersPublic,
)
from mainframe.contract.operator_schemas import CausePage as CausePageReply
from mainframe.contract.operator_schemas import DeadLetterPage as DeadLetterPageReply
from mainframe.contract.text import counted
from mainframe.lifecycle.causes import Cause
from mainframe.lifecycle.workers import failure_share, stands_out
from mainframe.shapes import scans as shapes
from mainframe.store import (
    Action,
    AuditEntry,
    CausePage,
    CauseSummary,
    DeadLetter,
    DeadLetterPage,
    DeliveryTotals,
    EndpointCard,
    EndpointView,
    Invalid,
    Overview,
    PausedQueue,
    QueueChange,
    Redriven,
    TokenView,
    WorkerHour,
)

# The origin of the redrives recorded before origins were.
UNKNOWN_ORIGIN = "unknown"
NO_ATTEMPT = FinalAttemptPublic(
    seq=None, outcome=None, summary=None, artifact=None, worker=None, at=None
)


def dead_letter(item: DeadLetter) -> DeadLetterPublic:
    a = item.final_attempt
    final = (
        NO_ATTEMPT
        if a is None
        else FinalAttemptPublic(
            seq=a.seq,
            outcome=a.outcome,
            summary=a.summary,
            artifact=a.artifact,
            worker=a.worker,
            at=rfc3339(a.closed_at),
        )
    )
    return DeadLetterPublic(
        **dict(shapes.scan(item.scan)),
        redriven_at=rfc3339(item.scan.redriven_at),
        redrive_count=item.scan.redrive_count,
        final_attempt=final,
        cause=cause_name(item.cause),
    )


def cause_name(found: Cause | None) -> CauseNamePublic | None:
    """A dead letter's cause by its key and pattern, None if it has none."""
    return None if found is None else CauseNamePublic(cause=found.key, pattern=found.pattern)


def cursor(keyset: tuple[int, int] | None) -> str | None:
    return None if keyset is None else f"{keyset[0]}-{keyset[1]}"


def parse_cursor(text: str | None, *, field: str = "query.cursor") -> tuple[int, int] | None:
    """The keyset a next_cursor names; 422 naming the field for anything else."""
    if text is None:
        return None
    at, _, scan_id = text.partition("-")
    if not (at.isdigit() and scan_id.isdigit() and len(at) <= 18 and len(scan_id) <= 18):
        raise Invalid(field, "use the next_cursor of a previous page")
    return int(at), int(scan_id)


# A redrive's audit line names this many of its scans; the rest are counted.
AUDIT_IDS_SHOWN = 10


def _scans(n: int | None) -> str:
    return counted(n, "scan")


def _tokens(n: int | None) -> str:
    return counted(n, "token")


def redrive_headline(entry: AuditEntry) -> str:
    """A redrive's audit line before the scans it names: how many it requeued, and how."""
    if entry.filter is not None:
        shown = {k: rfc3339(v) if k == "since" else v for k, v in entry.filter.items()}
        used = ", ".join(f"{k}={v}" for k, v in shown.items() if v is not None)
        return f"{_scans(entry.count)} requeued, by filter ({used or 'every dead letter'})"
    return f"{_scans(entry.count)} requeued of {len(entry.scan_ids or [])} named by id"


def redrive_named(entry: AuditEntry) -> tuple[list[int], int]:
    """The scans a redrive's audit line names, and how many they stand for: by id, the ids
    asked for; by filter or cause, the first ids it requeued out of all it requeued (none
    for an entry written before they were kept)."""
    if entry.filter is None:
        ids = entry.scan_ids or []
        return ids, len(ids)
    detail = entry.detail or {}
    kept = detail.get("requeued_ids")
    if not isinstance(kept, list):
        return [], 0
    return [int(scan_id) for scan_id in kept], int(detail.get("requeued") or 0)


def audit_target(entry: AuditEntry) -> str:
    """What an audit entry's action touched, as the one line the board and the API show."""
    detail = entry.detail or {}
    on = f" on {entry.endpoint}" if entry.endpoint is not None else ""
    if entry.action == Action.REDRIVE:
        ids, total = redrive_named(entry)
        if not ids:
            return redrive_headline(entry)
        named = ", ".join(f"#{scan_id}" for scan_id in ids[:AUDIT_IDS_SHOWN])
        more = f" and {total - AUDIT_IDS_SHOWN} more" if total > AUDIT_IDS_SHOWN else ""
        return f"{redrive_headline(entry)}: {named}{more}"
    if entry.action in (Action.TOKEN_CREATED, Action.TOKEN_DELETED):
        name = detail.get("name")
        return f'{detail.get("kind")} token {detail.get("token_id")} "{name}"{on}'
    if entry.action.startswith("hook_"):
        return f"hook {detail.get('hook_id')} ({detail.get('url')}){on}"
    if entry.action == Action.ENDPOINT_REVOKED:
        return f"endpoint {entry.endpoint}: {_scans(entry.count)} dead-lettered"
    if entry.action in (Action.QUEUE_PAUSED, Action.QUEUE_RESUMED):
        return f"queue {detail.get('queue')}{on}"
    if entry.action == Action.OWNER_TOKEN_ROTATED:
        return f"the owner's token: a new one, {_tokens(entry.count)} revoked"
    if entry.action == Action.ENDPOINT_CREATED:
        intake = ", open intake" if detail.get("open_intake") else ""
        return f"endpoint {entry.endpoint}{intake}"
    return "the board" if entry.action == Action.SIGNED_IN else entry.endpoint or ""


def audit_entry(entry: AuditEntry, owner: str) -> AuditPublic:
    """An audit entry of `owner` (whose entries are the only ones ever read) as shown."""
    return AuditPublic(
        audit_id=entry.id,
        at=rfc3339(entry.at),
        owner=owner,
        action=Action(entry.action),
        target=audit_target(entry),
        origin=cast(Origin, entry.origin or UNKNOWN_ORIGIN),
        endpoint=entry.endpoint,
        count=entry.count,
        scan_ids=entry.scan_ids,
        filter=entry.filter,
        detail=entry.detail,
    )


def card(c: EndpointCard, now: int) -> EndpointCardPublic:
    age = None if c.oldest_queued_at is None else round((now - c.oldest_queued_at) / 1e6, 3)
    return EndpointCardPublic(
        endpoint=c.name,
        open_intake=c.open_intake,
        revoked_at=rfc3339(c.revoked_at),
        counts=c.counts,
        oldest_queued_at=rfc3339(c.oldest_queued_at),
        oldest_queued_age_seconds=age,
        hooks=[
            HookHealthPublic(
                hook_id=h.hook_id,
                url=h.url,
                queue=h.queue,
                enabled=h.enabled,
                disabled_reason=h.disabled_reason,
                consecutive_failures=h.consecutive_failures,
                last_delivery_at=rfc3339(h.last_delivery_at),
            )
            for h in c.hooks
        ],
    )


def overview(o: Overview) -> OverviewPublic:
    return OverviewPublic(
        taken_at=rfc3339(o.taken_at),
        endpoints=[card(c, o.taken_at) for c in o.endpoints],
        totals=o.totals,
    )


def endpoint(view: EndpointView) -> EndpointPublic:
    return EndpointPublic(
        endpoint=view.name,
        open_intake=view.open_intake,
        created_at=rfc3339(view.created_at),
        revoked_at=rfc3339(view.revoked_at),
    )


def endpoint_detail(view: EndpointView, paused: list[PausedQueue]) -> EndpointDetail:
    """An endpoint with its paused queues."""
    queues = [
        PausedQueuePublic(queue=q.queue, paused_at=rfc3339(q.paused_at), paused_by=q.paused_by)
        for q in paused
    ]
    return EndpointDetail(**dict(endpoint(view)), paused_queues=queues)


def queue_change(change: QueueChange) -> QueueChangePublic:
    """What a pause or resume did."""
    return QueueChangePublic(
        endpoint=change.endpoint,
        queue=change.queue,
        paused=change.paused,
        changed=change.changed,
        scans=change.scans,
    )


def token(view: TokenView) -> TokenPublic:
    return TokenPublic(
        token_id=view.id,
        name=view.name,
        kind=view.kind,
        created_at=rfc3339(view.created_at),
        last_used_at=rfc3339(view.last_used_at),
    )


def redrive(done: Redriven) -> RedrivePublic:
    return RedrivePublic(
        redriven=done.redriven,
        skipped=[SkippedPublic(scan_id=s.scan_id, reason=s.reason) for s in done.skipped],
        audit_id=done.audit_id,
    )


def dead_letter_page(found: DeadLetterPage) -> DeadLetterPageReply:
    return DeadLetterPageReply(
        scans=[dead_letter(item) for item in found.items],
        next_cursor=cursor(found.next_cursor),
        count=found.count,
    )


def audit_page(entries: list[AuditEntry], owner: str, *, full: bool) -> AuditPage:
    """A page of the audit trail; a full page has a cursor to the next, older one."""
    next_cursor = str(entries[-1].id) if full and entries else None
    return AuditPage(entries=[audit_entry(e, owner) for e in entries], next_cursor=next_cursor)


def revoked(endpoint: str, dead_lettered: int) -> RevokedPublic:
    return RevokedPublic(endpoint=endpoint, revoked=True, dead_lettered=dead_lettered)


def delivery_stats(
    start_us: int, end_us: int, totals: DeliveryTotals, *, complete: bool
) -> DeliveryStats:
    return DeliveryStats(
        start=rfc3339(start_us),
        end=rfc3339(end_us),
        attempts=totals.attempts,
        failures=totals.failures,
        complete=complete,
    )


def cause(item: CauseSummary) -> CausePublic:
    """A cause as the causes view shows it."""

    def facet(name: str) -> list[FacetPublic]:
        return [
            FacetPublic(endpoint=f.endpoint, value=f.value, dead_letters=f.dead_letters)
            for f in item.facets.get(name, [])
        ]

    return CausePublic(
        cause=item.cause,
        pattern=item.pattern,
        count=item.dead_letters,
        first_seen_at=rfc3339(item.first_seen_at),
        last_seen_at=rfc3339(item.last_seen_at),
        example_scan_id=item.example_scan_id,
        queues=facet("queue"),
        kinds=facet("kind"),
        workers=facet("worker"),
        last_24_hours=list(item.hours),
    )


def cause_page(found: CausePage) -> CausePageReply:
    """A page of causes, with the cursor of the next."""
    nxt = found.next_cursor
    return CausePageReply(
        causes=[cause(item) for item in found.items],
        next_cursor=None if nxt is None else f"{nxt[0]}-{nxt[1]}",
    )


def parse_cause_cursor(text: str | None) -> tuple[int, str] | None:
    """The keyset a causes page's next_cursor names; 422 naming the field otherwise."""
    if text is None:
        return None
    at, _, key = text.partition("-")
    if not (at.isdigit() and len(at) <= 18 and len(key) == 16 and _is_hex(key)):
        raise Invalid("query.cursor", "use the next_cursor of a previous page")
    return int(at), key


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def workers(endpoint: str, tokens: list[TokenView], hours: dict[str, WorkerHour]) -> WorkersPublic:
    """An endpoint's workers at a glance: each worker credential and any worker seen in the
    hour without one, its hour, its leases, and whether it stands out."""
    credentials = {t.name: t for t in tokens if t.kind == "worker"}
    names = sorted(set(credentials) | {w for w in hours if w})
    failed, finished, lapsed = (sum(getattr(h, k) for h in hours.values()) for k in _HOUR)
    total = (failed, finished, lapsed)
    rows = []
    for name in names:
        hour = hours.get(name, WorkerHour(0, 0, 0, 0))
        mine = (hour.failed, hour.finished, hour.lapsed)
        token = credentials.get(name)
        rows.append(WorkerPublic(
            worker=name,
            token_id=token.id if token else None,
            last_used_at=rfc3339(token.last_used_at) if token else None,
            leases_held=hour.leases_held,
            last_hour=HourPublic(finished=hour.finished, failed=hour.failed,
                                 lapsed=hour.lapsed),
            failure_share=failure_share(*mine),
            stands_out=stands_out(worker=mine, endpoint=total),
        ))  # fmt: skip
    return WorkersPublic(endpoint=endpoint, failure_share=failure_share(*total), workers=rows)


_HOUR = ("failed", "finished", "lapsed")  # the order failure_share and stands_out take

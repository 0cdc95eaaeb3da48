"""The board's URL filter: pill, search, endpoint, queue, reason and the page's cursor (older
than `cursor`, or newer than `newer`), parsed from the query string so a link can be shared,
and checked like the API checks them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.datastructures import ImmutableMultiDict

from mainframe.contract.limits import MAX_QUERY_LENGTH
from mainframe.contract.operator_schemas import CAUSE_KEY
from mainframe.contract.text import printable
from mainframe.lifecycle.rules import DeadLetterReason, Status
from mainframe.store import DeadLetterFilter, ListingFilter

# The pills, in the order shown, and the status each lists (None: every status). Queued and
# Paused part the QUEUED scans: Paused lists those a paused queue holds, which no poll leases.
PILLS: dict[str, Status | None] = {
    "all": None,
    "queued": Status.QUEUED,
    "paused": Status.QUEUED,
    "pending": Status.PENDING,
    "finished": Status.FINISHED,
    "failed": Status.FAILED,
    "dead": Status.FAILED,
}
# What each pill's heading calls its rows.
TITLES = {
    "all": "All scans",
    "queued": "Queued scans",
    "paused": "Scans held by a paused queue",
    "pending": "Pending scans",
    "finished": "Finished scans",
    "failed": "Failed scans",
    "dead": "Dead letters",
}
REASONS = tuple(reason.value for reason in DeadLetterReason)
PAGE_SIZE = 50
CAUSE = re.compile(CAUSE_KEY)
_LIMITS = {"q": MAX_QUERY_LENGTH, "endpoint": 200, "queue": 100, "cursor": 40, "newer": 40}
_DIGITS = 18  # a cursor's numbers stay within the database's 64 bits


class BadFilter(ValueError):
    """A query-string field the board cannot use; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class BoardFilter:
    pill: str = "all"
    q: str | None = None
    endpoint: str | None = None
    queue: str | None = None
    reason: str | None = None
    cursor: str | None = None  # the page holds what is older than this
    newer: str | None = None  # the page holds what is just newer than this
    cause: str | None = None  # a cause's key: the dead letters of one cause

    def dead_letters(self) -> DeadLetterFilter:
        return DeadLetterFilter(self.q, self.reason, None, self.endpoint, self.queue, self.cause)

    def listing(self, pill: str | None = None) -> ListingFilter:
        """The store's filter of a pill's listing (this one's by default)."""
        key = pill or self.pill
        status = PILLS[key]
        dead = True if key == "dead" else False if key == "failed" else None
        paused = True if key == "paused" else False if key == "queued" else None
        return ListingFilter(
            self.endpoint, status.value if status else None, self.queue, dead, self.q, paused
        )

    @property
    def narrows(self) -> bool:
        """Whether anything beyond a choice of endpoint narrows the rows."""
        return bool(self.q or self.queue)

    def query(self, **changes: str | None) -> str:
        """This filter as a query string, with `changes` applied (None drops a field)."""
        fields = {
            "status": self.pill, "q": self.q, "endpoint": self.endpoint, "queue": self.queue,
            "reason": self.reason, "cause": self.cause, "cursor": self.cursor,
            "newer": self.newer, **changes,
        }  # fmt: skip
        return urlencode({k: v for k, v in fields.items() if v})

    def search(self) -> str:
        """This filter without its page: what a pill, a redrive or a Clear link keeps."""
        return self.query(cursor=None, newer=None)


def _number(text: str) -> bool:
    # ASCII only: str.isdigit() admits digits int() refuses ('²').
    return text.isascii() and text.isdigit() and len(text) <= _DIGITS


def dead_keyset(text: str | None) -> tuple[int, int] | None:
    """The (dead_lettered_at, id) keyset a dead-letter cursor names; BadFilter otherwise."""
    if text is None:
        return None
    at, _, scan_id = text.partition("-")
    if not all(_number(part) for part in (at, scan_id)):
        raise BadFilter("cursor", "use the cursor of an Older or Newer link")
    return int(at), int(scan_id)


def scan_keyset(text: str | None) -> int | None:
    """The scan id a listing's cursor names; BadFilter otherwise."""
    if text is None:
        return None
    if not _number(text):
        raise BadFilter("cursor", "use the cursor of an Older or Newer link")
    return int(text)


def parse(params: ImmutableMultiDict[str, str] | dict[str, str]) -> BoardFilter:
    """The filter a URL names; BadFilter for anything out of bounds."""
    values: dict[str, str | None] = {}
    for field, limit in _LIMITS.items():
        value = (params.get(field) or "").strip()
        if len(value) > limit:
            raise BadFilter(field, f"at most {limit} characters")
        if not printable(value):
            raise BadFilter(field, "no control characters")
        values[field] = value or None
    pill = params.get("status") or "all"
    if pill not in PILLS:
        raise BadFilter("status", f"one of {', '.join(PILLS)}")
    reason = params.get("reason") or None
    if reason is not None and reason not in REASONS:
        raise BadFilter("reason", f"one of {', '.join(REASONS)}")
    cause = params.get("cause") or None
    if cause is not None and not CAUSE.fullmatch(cause):
        raise BadFilter("cause", "a cause's key, as the Causes view links it")
    keyset = dead_keyset if pill == "dead" else scan_keyset
    for field in ("cursor", "newer"):
        try:
            keyset(values[field])
        except BadFilter as exc:
            raise BadFilter(field, str(exc)) from None
    return BoardFilter(
        pill,
        values["q"],
        values["endpoint"],
        values["queue"],
        reason,
        values["cursor"],
        values["newer"],
        cause,
    )


def lenient(params: ImmutableMultiDict[str, str]) -> BoardFilter:
    """The filter a link carried along (a scan page's way back), or none if it is unusable."""
    try:
        return parse(params)
    except BadFilter:
        return BoardFilter()

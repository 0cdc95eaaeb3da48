"""The board's URL filter: pill, search, endpoint, queue, reason and cursor, parsed from the
query string (so a link can be shared) and checked like the API checks them."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.datastructures import ImmutableMultiDict

from mainframe.contract.text import printable
from mainframe.lifecycle.rules import DeadLetterReason, Status
from mainframe.store.dead_letters import DeadLetterFilter
from mainframe.store.search import MAX_QUERY_LENGTH

# The pills, in the order shown, and the status each lists (None: every status).
PILLS: dict[str, Status | None] = {
    "all": None,
    "queued": Status.QUEUED,
    "pending": Status.PENDING,
    "finished": Status.FINISHED,
    "failed": Status.FAILED,
    "dead": Status.FAILED,
}
REASONS = tuple(reason.value for reason in DeadLetterReason)
PAGE_SIZE = 50
_LIMITS = {"q": MAX_QUERY_LENGTH, "endpoint": 200, "queue": 100, "cursor": 40}


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
    cursor: str | None = None

    def dead_letters(self) -> DeadLetterFilter:
        return DeadLetterFilter(self.q, self.reason, None, self.endpoint, self.queue)

    def query(self, **changes: str | None) -> str:
        """This filter as a query string, with `changes` applied (None drops a field)."""
        fields = {
            "status": self.pill, "q": self.q, "endpoint": self.endpoint, "queue": self.queue,
            "reason": self.reason, **changes,
        }  # fmt: skip
        return urlencode({k: v for k, v in fields.items() if v})


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
    cursor = values["cursor"]
    if pill != "dead" and cursor is not None and not (cursor.isdigit() and len(cursor) <= 18):
        raise BadFilter("cursor", "use the Older link's cursor")
    return BoardFilter(
        pill, values["q"], values["endpoint"], values["queue"], reason, values["cursor"]
    )

"""The windowed delivery-stats API that the watcher polls. Rate-limited per token: over the
limit it answers 429 with Retry-After, which the watcher must treat as inconclusive."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from mainframe.api.deps import BearerDep, OwnerDep, RuntimeDep, owner_id
from mainframe.api.responses import Reply, error
from mainframe.clock import MICROS
from mainframe.contract.hook_schemas import DeliveryStats
from mainframe.contract.limits import MAX_STATS_SPAN_S
from mainframe.contract.schemas import ErrorBody
from mainframe.ratelimit import retry_after_header
from mainframe.shapes import operator as shape
from mainframe.store import Invalid

router = APIRouter(prefix="/api/v1/deliveries", tags=["deliveries"])
MINUTE_US = 60 * MICROS
MAX_SPAN_US = MAX_STATS_SPAN_S * MICROS


def _micros(value: datetime, field: str) -> int:
    if value.tzinfo is None:
        raise Invalid(f"query.{field}", "give an RFC 3339 time with a zone, e.g. ...Z")
    stamp = round(value.timestamp() * MICROS)
    if stamp % MINUTE_US:
        raise Invalid(f"query.{field}", "windows start and end on whole minutes")
    return stamp


@router.get(
    "/stats",
    response_model=DeliveryStats,
    responses={429: {"model": ErrorBody}, 401: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def delivery_stats(
    rt: RuntimeDep,
    owner: OwnerDep,
    bearer: BearerDep,
    start: Annotated[datetime, Query(description="Window start (RFC 3339, whole minute).")],
    end: Annotated[datetime, Query(description="Window end, exclusive.")],
) -> DeliveryStats | Reply:
    """Webhook delivery attempts and failures of the owner's endpoints in [start, end);
    `complete` is false until the window has closed."""
    assert bearer is not None
    wait = rt.stats_limiter.take(bearer.credentials)
    if wait > 0:
        headers = {"Retry-After": retry_after_header(wait)}
        return error(429, "rate_limited", "too many stats requests; retry later", headers)
    start_us, end_us = _micros(start, "start"), _micros(end, "end")
    if not 0 < end_us - start_us <= MAX_SPAN_US:
        raise Invalid("query.end", "end must be after start, at most 24 hours later")
    # The clock is read before the counts: a window that had closed by then is summed whole,
    # whereas one that closed between the two reads could be called complete with part of it.
    complete = end_us <= await rt.store.deliveries.now()
    totals = await rt.store.deliveries.totals(owner_id(owner), start_us=start_us, end_us=end_us)
    return shape.delivery_stats(start_us, end_us, totals, complete=complete)

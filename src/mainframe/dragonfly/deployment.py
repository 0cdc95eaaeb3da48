"""The routes the rest of a dragonfly deployment calls under `/dragonfly`: the loader's batch
and the bot's lookups, queueing, queue status, reports, alert threshold and suppressions
(docs/dragonfly.md). Each authenticates a source token as Cloudflare Access would, works on
that token's endpoint only, and answers JSON (`null` where upstream did)."""

from __future__ import annotations

from typing import Annotated, TypeVar

import orjson
from fastapi import APIRouter, Query
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticError
from starlette.requests import Request
from starlette.responses import Response

from mainframe.clock import MICROS, rfc3339
from mainframe.contract.dragonfly_schemas import (
    MAX_BATCH_PACKAGES,
    AlertingPublic,
    AlertingUpdate,
    PackagePage,
    PackagePublic,
    PackageSpec,
    Queued,
    QueueStatusPublic,
    ReportBody,
)
from mainframe.contract.schemas import AsciiInt
from mainframe.dragonfly import packages
from mainframe.dragonfly.packages import (
    DEFAULT_THRESHOLD,
    MAX_PAGE_SIZE,
    MAX_UNPAGED,
    BadRequest,
)
from mainframe.dragonfly.reports import invalid, json_body
from mainframe.dragonfly.surface import surface_of
from mainframe.store import Conflict, Invalid, NotFound, ScanSpec
from mainframe.store.dragonfly.records import Page
from mainframe.web import BearerDep

router = APIRouter(prefix="/dragonfly", include_in_schema=False)
T = TypeVar("T")
# Each body's reader, built once.
_BATCH: TypeAdapter[list[PackageSpec]] = TypeAdapter(list[PackageSpec])
_SPEC: TypeAdapter[PackageSpec] = TypeAdapter(PackageSpec)
_REPORT: TypeAdapter[ReportBody] = TypeAdapter(ReportBody)
_ALERTING: TypeAdapter[AlertingUpdate] = TypeAdapter(AlertingUpdate)
Int = Annotated[int | None, Query(), AsciiInt]
PageNumber = Annotated[int | None, Query(ge=1), AsciiInt]
PageSize = Annotated[int | None, Query(ge=1, le=MAX_PAGE_SIZE), AsciiInt]


async def read_body(request: Request, adapter: TypeAdapter[T]) -> T:
    """The body as `adapter` reads it, whatever its content type; 422 naming the field."""
    value = json_body(await request.body())
    try:
        return adapter.validate_python(value)
    except PydanticError as exc:
        raise invalid(exc) from None


def _null() -> Response:
    return Response(b"null", media_type="application/json")


@router.post("/batch/package")
async def queue_batch(request: Request, bearer: BearerDep) -> Response:
    """The loader's minute: every new (name, version) queued with its files from PyPI; known
    pairs and releases PyPI does not know are skipped; nothing is queued if PyPI fails."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    specs = await read_body(request, _BATCH)
    if len(specs) > MAX_BATCH_PACKAGES:
        raise Invalid("body", f"at most {MAX_BATCH_PACKAGES} packages per batch")
    assert caller.endpoint_id is not None
    pairs = list(dict.fromkeys((spec.name, spec.version) for spec in specs))
    known = await surface.store.dragonfly.known(caller.endpoint_id, pairs)
    fresh = [pair for pair in pairs if pair not in known]
    releases = await surface.services.releases(fresh)
    found = [release for release in releases.values() if release is not None]
    # PyPI may spell a release otherwise than the feed did: its spelling is stored, so a
    # pair known under it is skipped too.
    named = [(release.name, release.version) for release in found]
    known |= await surface.store.dragonfly.known(caller.endpoint_id, named)
    new = {
        (r.name, r.version): _spec(r.name, r.version, r.urls)
        for r in found
        if (r.name, r.version) not in known
    }
    if new:
        await surface.store.intake.submit_many(caller, endpoint=None, specs=list(new.values()))
    else:
        # A minute whose releases were all known is still the loader at work: the intake
        # dead-man's switch hears of it (docs/observability.md, "Quiet sources").
        surface.store.last_submissions.note(caller.digest)
    return _null()


def _spec(name: str, version: str, urls: list[str]) -> ScanSpec:
    payload = orjson.dumps({"distributions": urls}).decode()
    return ScanSpec(name=name, version=version, payload=payload)


@router.post("/package")
async def queue_package(request: Request, bearer: BearerDep) -> Queued:
    """The bot's queue command: 404 when PyPI knows no such release, 409 when the endpoint
    already holds a scan of it."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    spec = await read_body(request, _SPEC)
    assert caller.endpoint_id is not None
    release = await surface.services.release(spec.name, spec.version)
    if release is None:
        raise NotFound(f"PyPI has no release {spec.name} {spec.version}")
    pair = (spec.name, spec.version)
    if await surface.store.dragonfly.known(caller.endpoint_id, [pair]):
        raise Conflict("already_queued", f"{spec.name} {spec.version} was already queued")
    [done] = await surface.store.intake.submit_many(
        caller, endpoint=None, specs=[_spec(spec.name, spec.version, release.urls)]
    )
    if done.error is not None:
        raise done.error
    if not done.created or done.scan is None:
        raise Conflict("already_queued", f"{spec.name} {spec.version} was already queued")
    return Queued(id=str(done.scan.id))


@router.get("/package")
async def lookup_packages(
    request: Request,
    bearer: BearerDep,
    name: str | None = None,
    version: str | None = None,
    since: Int = None,
    page: PageNumber = None,
    size: PageSize = None,
) -> list[PackagePublic] | PackagePage:
    """Scans by name (and version), or finished since a Unix second (of a name), newest
    queued first; one page when `page` and `size` are both sent."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    asked = packages.lookup(name, version, since, page, size)
    assert caller.endpoint_id is not None
    window = asked.window
    records = surface.store.dragonfly
    if asked.since_us is not None:
        rows, total = await records.finished_since(
            caller.endpoint_id, asked.since_us, asked.name, window, count=asked.paged
        )
    else:
        assert asked.name is not None
        rows, total = await records.of_name(
            caller.endpoint_id, asked.name, asked.version, window, count=asked.paged
        )
    items = [packages.package(row) for row in rows]
    if asked.page is not None and asked.size is not None and total is not None:
        return packages.page_of(items, total, asked.page, asked.size)
    if len(items) > MAX_UNPAGED:
        raise BadRequest(f"more than {MAX_UNPAGED} packages match: send page and size")
    return items


@router.get("/reported-packages")
async def reported_packages(
    request: Request,
    bearer: BearerDep,
    since: Int = None,
    name: str | None = None,
    page: Annotated[int, Query(ge=1), AsciiInt] = 1,
    size: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE), AsciiInt] = 50,
) -> PackagePage:
    """The endpoint's reports, newest first, always one page."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    assert caller.endpoint_id is not None
    since_us = max(since or 0, 0) * MICROS
    found, total = await surface.store.dragonfly.reported(
        caller.endpoint_id, since_us, name, Page.numbered(page, size)
    )
    items = [packages.reported_package(row) for row in found]
    return packages.page_of(items, total, page, size)


@router.get("/queue-status")
async def queue_status(request: Request, bearer: BearerDep) -> QueueStatusPublic:
    """The endpoint's queue, counted at most a few seconds ago."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    assert caller.endpoint_id is not None
    return await surface.queue_status(caller.endpoint_id)


@router.post("/report")
async def report(request: Request, bearer: BearerDep) -> Response:
    """Report a package to PyPI through the reporter, refused in upstream's order; it is
    recorded (`reported_at`, `reported_by`) only once the reporter took it."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    body = await read_body(request, _REPORT)
    assert caller.endpoint_id is not None
    records = surface.store.dragonfly
    scans, _ = await records.of_name(
        caller.endpoint_id, body.name, None, Page(0, MAX_UNPAGED), count=False
    )
    target = packages.report_target(
        scans,
        version=body.version,
        reported_version=await records.report_of_name(caller.endpoint_id, body.name),
        inspector_url=body.inspector_url,
    )
    if not await surface.services.project_exists(body.name):
        raise NotFound(f"PyPI has no project {body.name}")
    await surface.services.report(
        body.name,
        {
            "kind": "is_malware",
            "summary": body.additional_information,
            "inspector_url": target.inspector_url,
            "extra": {"yara_rules": target.rules},
        },
    )
    kept = await records.record_report(
        caller.endpoint_id,
        target.scan,
        by=caller.name,
        summary=body.additional_information,
        inspector_url=target.inspector_url,
    )
    if not kept:
        raise Conflict("already_reported", "this package was reported meanwhile")
    return _null()


@router.get("/alerting/configuration")
async def alerting(request: Request, bearer: BearerDep) -> AlertingPublic:
    """The score at and above which the bot alerts: the endpoint's, or the default."""
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    assert caller.endpoint_id is not None
    found = await surface.store.dragonfly.alerting(caller.endpoint_id)
    if found is None:
        return AlertingPublic(
            production_score_threshold=DEFAULT_THRESHOLD, updated_at=None, updated_by=None
        )
    return AlertingPublic(
        production_score_threshold=found.threshold,
        updated_at=rfc3339(found.updated_at),
        updated_by=found.updated_by,
    )


@router.put("/alerting/configuration")
async def set_alerting(request: Request, bearer: BearerDep) -> AlertingPublic:
    surface = surface_of(request)
    caller = await surface.source(request, bearer)
    body = await read_body(request, _ALERTING)
    assert caller.endpoint_id is not None
    found = await surface.store.dragonfly.set_alerting(
        caller.endpoint_id, body.production_score_threshold, by=caller.name
    )
    return AlertingPublic(
        production_score_threshold=found.threshold,
        updated_at=rfc3339(found.updated_at),
        updated_by=found.updated_by,
    )

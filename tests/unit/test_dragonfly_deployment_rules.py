"""The loader's and the bot's rules (dragonfly/packages.py) over plain rows, and the calls to
PyPI and the reporter (dragonfly/upstream.py) against scripted transports: what the bot is
shown for each state of a scan, which lookups a query may ask, the queue status's sums, a
report's refusals in upstream's order, and a PyPI that is down, slow or says nonsense."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest

from mainframe.clock import MICROS
from mainframe.dragonfly import packages
from mainframe.dragonfly.packages import BadRequest, lookup, normalized, report_target
from mainframe.dragonfly.upstream import MAX_REPLY_BYTES, Release, Services
from mainframe.store import Conflict, NotFound, Unavailable
from mainframe.store.dragonfly.records import PackageRow, QueueCounts

T0 = 1_750_000_000 * MICROS
RESULT = orjson.dumps(
    {"score": 9, "inspector_url": "https://i/x", "rules_matched": ["r1", 2], "commit": "c"}
).decode()
PAYLOAD = orjson.dumps({"distributions": ["https://files.example/x.tar.gz"]}).decode()


def row(status: str, **changes: object) -> PackageRow:
    base = PackageRow(
        id=7, name="left-pad", version="1.0", status=status, payload=PAYLOAD, result=None,
        created_at=T0, source="loader", leased_at=None, worker=None, attempt_count=0,
        finished_at=None, dead_lettered_at=None, reported_at=None, reported_by=None,
        report_summary=None,
    )  # fmt: skip
    return base._replace(**changes)


def test_each_state_is_shown_as_the_bots_package() -> None:
    queued = packages.package(row("QUEUED"))
    assert (queued.status, queued.scan_id, queued.queued_at) == ("queued", "7", T0 // MICROS)
    assert queued.download_urls == ["https://files.example/x.tar.gz"] and queued.score is None
    leased = packages.package(row("PENDING", leased_at=T0 + MICROS, worker="w1"))
    assert (leased.status, leased.pending_at, leased.pending_by) == (
        "pending",
        T0 // MICROS + 1,
        "w1",
    )
    done = packages.package(
        row("FINISHED", result=RESULT, worker="w1", finished_at=T0 + 5 * MICROS)
    )
    assert (done.status, done.score, done.inspector_url, done.commit_hash) == (
        "finished",
        9,
        "https://i/x",
        "c",
    )
    assert done.rules == ["r1"]  # what is not a rule name is left out
    assert (done.finished_at, done.finished_by) == (T0 // MICROS + 5, "w1")
    # A failure (a dead letter too) has no finished_at, as upstream's had none.
    dead = packages.package(
        row("FAILED", finished_at=T0, dead_lettered_at=T0, worker="w1", result=RESULT)
    )
    assert (dead.status, dead.finished_at, dead.finished_by, dead.score) == (
        "failed",
        None,
        None,
        None,
    )
    assert dead.dead_lettered_at == T0 // MICROS
    assert packages.package(row("QUARANTINED")).status is None
    # Another kind's result, or none that is JSON, shows nulls rather than failing.
    odd = packages.package(row("FINISHED", result="[1]", payload="not json either"[:0] or None))
    assert (odd.score, odd.rules, odd.download_urls) == (None, [], [])


@pytest.mark.parametrize(
    ("name", "version", "since"),
    [(None, None, None), (None, "1.0", None), ("x", "1.0", 5), (None, "1.0", 5)],
)
def test_upstreams_refused_combinations_are_400(
    name: str | None, version: str | None, since: int | None
) -> None:
    with pytest.raises(BadRequest):
        lookup(name, version, since, None, None)


def test_a_lookup_pages_only_with_page_and_size() -> None:
    assert lookup("x", None, None, 2, 10).paged
    assert not lookup("x", None, None, 2, None).paged
    assert lookup(None, None, 3, None, None).since_us == 3 * MICROS
    page = packages.page_of([], 21, 1, 10)
    assert (page.total, page.pages) == (21, 3)
    assert packages.page_of([], 0, 1, 10).pages == 0


def test_the_queue_status_sums_what_waits() -> None:
    counts = QueueCounts(queued=5, waiting=2, in_progress=3, lapsed=1, exhausted=4,
                         stranded=0, oldest_queued_at=T0, now=T0 + 90 * MICROS)  # fmt: skip
    status = packages.queue_status(counts)
    assert (status.retryable, status.total_backlog) == (3, 8)
    assert (status.oldest_queued_at, status.oldest_age_seconds) == (T0 // MICROS, 90)
    empty = packages.queue_status(counts._replace(oldest_queued_at=None))
    assert (empty.oldest_queued_at, empty.oldest_age_seconds) == (None, None)


def test_a_reports_refusals_come_in_upstreams_order() -> None:
    scans = [row("FINISHED", version="2.0", result=RESULT), row("QUEUED", version="1.0")]
    with pytest.raises(NotFound, match="name"):
        report_target([], version="1.0", reported_version=None, inspector_url="u")
    with pytest.raises(Conflict, match="already reported"):
        report_target(scans, version="9", reported_version="1.0", inspector_url=None)
    with pytest.raises(NotFound, match="version"):
        report_target(scans, version="9", reported_version=None, inspector_url="u")
    with pytest.raises(BadRequest):
        report_target(scans, version="1.0", reported_version=None, inspector_url=None)
    found = report_target(scans, version="2.0", reported_version=None, inspector_url=None)
    assert (found.inspector_url, found.rules) == ("https://i/x", ["r1"])
    sent = report_target(scans, version="2.0", reported_version=None, inspector_url="https://b")
    assert sent.inspector_url == "https://b"


def test_names_compare_as_pep_503_says() -> None:
    assert normalized("Flask_Login") == normalized("flask.login") == "flask-login"
    assert normalized("A--B__c") == "a-b-c"


def _services(handler: object) -> Services:
    transport = httpx.MockTransport(handler)  # type: ignore[arg-type]
    return Services("http://pypi.test", "http://reporter.test", timeout=1, transport=transport)


def _release_json(name: str, version: str, *urls: str) -> bytes:
    files = [{"url": url} for url in urls]
    return orjson.dumps({"info": {"name": name, "version": version}, "urls": files})


def test_releases_are_looked_up_and_unknown_ones_skipped() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/pypi/left-pad/1.0/json":
            body = _release_json("Left-Pad", "1.0", "https://f/x.tar.gz", "ftp://nope", "x")
            return httpx.Response(200, content=body)
        return httpx.Response(404)

    found = asyncio.run(_services(handler).releases([("left-pad", "1.0"), ("ghost", "1")]))
    assert found == {
        ("left-pad", "1.0"): Release("Left-Pad", "1.0", ["https://f/x.tar.gz"]),
        ("ghost", "1"): None,
    }


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(500),
        httpx.Response(200, content=b"<html>"),
        httpx.Response(200, content=b'{"info": {"name": 1}}'),
        httpx.Response(200, content=b'{"info": {"name": "a\\u0000b", "version": "1"}, "urls": []}'),
        httpx.Response(200, content=b'{"info": {"name": "a", "version": "1"}, "urls": 5}'),
        httpx.Response(200, headers={"content-length": str(MAX_REPLY_BYTES + 1)}, content=b"{}"),
        httpx.Response(200, content=b" " * (MAX_REPLY_BYTES + 1)),
    ],
)
def test_a_pypi_that_fails_is_unavailable_not_an_error(answer: httpx.Response) -> None:
    with pytest.raises(Unavailable) as refused:
        asyncio.run(_services(lambda _request: answer).releases([("x", "1")]))
    assert refused.value.code == "pypi_unavailable" and refused.value.retry_after > 0


def test_an_unreachable_pypi_or_reporter_is_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("slow", request=request)

    services = _services(handler)
    with pytest.raises(Unavailable, match="pypi"):
        asyncio.run(services.release("x", "1"))
    with pytest.raises(Unavailable, match="reporter"):
        asyncio.run(services.report("x", {}))


def test_a_report_is_handed_on_and_a_refusal_is_not_taken() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200 if request.url.raw_path == b"/report/left%20pad" else 400)

    services = _services(handler)
    asyncio.run(services.report("left pad", {"kind": "is_malware"}))
    assert orjson.loads(seen[0].content) == {"kind": "is_malware"}
    with pytest.raises(Unavailable, match="400"):
        asyncio.run(services.report("other", {}))
    unset = Services("http://pypi.test", None, timeout=1)
    with pytest.raises(Unavailable, match="MAINFRAME_DRAGONFLY_REPORTER_URL"):
        asyncio.run(unset.report("x", {}))


def test_a_project_exists_unless_pypi_says_404() -> None:
    answers = {"/project/there": 301, "/project/gone": 404, "/project/broken": 502}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(answers[request.url.path])

    services = _services(handler)
    assert asyncio.run(services.project_exists("there")) is True
    assert asyncio.run(services.project_exists("gone")) is False
    with pytest.raises(Unavailable):
        asyncio.run(services.project_exists("broken"))

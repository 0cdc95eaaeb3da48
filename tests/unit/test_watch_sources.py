"""Every way one poll of a source can go, classified; missing is never zero."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from mainframe.clock import MICROS, rfc3339
from mainframe.watch.observations import Counts, Observation, PollClass
from mainframe.watch.sources import MAX_RESPONSE_BYTES, MainframeSource, PrometheusSource
from mainframe.watch.windows import Window

WINDOW = Window.from_key("2026-09-27T10:14:00Z/60s")
START, END = "2026-09-27T10:14:00Z", "2026-09-27T10:15:00Z"
Handler = Callable[[httpx.Request], httpx.Response]


def stats(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "start": "2026-09-27T10:14:00.000000Z",
        "end": "2026-09-27T10:15:00.000000Z",
        "attempts": 40,
        "failures": 3,
        "complete": True,
    }
    body.update(overrides)
    return body


def mainframe(handler: Handler) -> MainframeSource:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return MainframeSource("http://mf.test/", "owner-token", client=client)


def answer(status: int, body: Any = None, **kwargs: Any) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        if isinstance(body, bytes):
            return httpx.Response(status, content=body, **kwargs)
        return httpx.Response(status, json=body, **kwargs)

    return handle


def test_window_bounds_are_rendered_as_rfc3339() -> None:
    assert rfc3339(WINDOW.start_us, precision="auto") == START
    assert rfc3339(WINDOW.start_us + 5, precision="auto") == "2026-09-27T10:14:00.000005Z"


def test_years_before_1000_are_padded_in_the_window_key_and_the_query() -> None:
    # strftime("%Y") renders year 999 as "999" on Linux; RFC 3339 wants four digits.
    start = datetime(999, 1, 1, tzinfo=UTC)
    window = Window(int(start.timestamp()) * MICROS, 60)
    assert window.key == "0999-01-01T00:00:00Z/60s"
    assert Window.from_key(window.key) == window
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=stats(start=START, end=END))

    mainframe(handle).fetch(window)
    (request,) = seen
    assert parse_qs(request.url.query.decode()) == {
        "start": ["0999-01-01T00:00:00Z"],
        "end": ["0999-01-01T00:01:00Z"],
    }


def test_mainframe_asks_for_the_window_with_the_owner_token() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=stats())

    observation = mainframe(handle).fetch(WINDOW)

    assert observation == Observation.of(40, 3)
    assert observation.complete
    (request,) = seen
    assert request.method == "GET"
    assert request.url.path == "/api/v1/deliveries/stats"
    assert parse_qs(request.url.query.decode()) == {"start": [START], "end": [END]}
    assert request.headers["authorization"] == "Bearer owner-token"


def test_mainframe_accepts_bounds_written_without_fractions() -> None:
    observation = mainframe(answer(200, stats(start=START, end=END))).fetch(WINDOW)
    assert observation.counts == Counts(40, 3)


def test_zero_counts_of_a_complete_window_are_complete() -> None:
    observation = mainframe(answer(200, stats(attempts=0, failures=0))).fetch(WINDOW)
    assert observation == Observation.of(0, 0)


def test_an_open_window_is_partial_not_zero() -> None:
    observation = mainframe(answer(200, stats(attempts=0, failures=0, complete=False))).fetch(
        WINDOW
    )
    assert observation.poll_class is PollClass.PARTIAL
    assert observation.counts is None
    assert not observation.complete


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"\xff\xfe",
        b"[1, 2]",
        b'"a string"',
        json.dumps(stats(attempts=None)).encode(),
        json.dumps({k: v for k, v in stats().items() if k != "failures"}).encode(),
        json.dumps(stats(attempts="40")).encode(),
        json.dumps(stats(attempts=40.0)).encode(),
        json.dumps(stats(failures=True)).encode(),
        json.dumps(stats(attempts=True, failures=False)).encode(),
        json.dumps(stats(failures=-1)).encode(),
        json.dumps(stats(attempts=2, failures=3)).encode(),
        json.dumps(stats(complete="true")).encode(),
        json.dumps(stats(complete=1)).encode(),
        json.dumps({k: v for k, v in stats().items() if k != "complete"}).encode(),
        json.dumps(stats(start="2026-09-27T10:13:00Z")).encode(),
        json.dumps(stats(end="2026-09-27T10:16:00Z")).encode(),
        json.dumps(stats(start="2026-09-27T10:14:00")).encode(),
        json.dumps(stats(start=None)).encode(),
        json.dumps({k: v for k, v in stats().items() if k != "end"}).encode(),
    ],
)
def test_a_malformed_stats_body_is_malformed(body: bytes) -> None:
    observation = mainframe(answer(200, body)).fetch(WINDOW)
    assert observation.poll_class is PollClass.MALFORMED
    assert observation.counts is None
    assert observation.detail


def test_an_oversized_body_is_refused_unread() -> None:
    big = b" " * (MAX_RESPONSE_BYTES + 1)
    observation = mainframe(answer(200, big)).fetch(WINDOW)
    assert observation.poll_class is PollClass.MALFORMED
    assert "larger than" in observation.detail


def test_an_oversized_streamed_body_without_length_is_refused() -> None:
    def chunks() -> Any:
        for _ in range(MAX_RESPONSE_BYTES // 65536 + 2):
            yield b" " * 65536

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=chunks())

    observation = mainframe(handle).fetch(WINDOW)
    assert observation.poll_class is PollClass.MALFORMED


def test_429_is_throttled_and_keeps_retry_after() -> None:
    observation = mainframe(
        answer(429, {"error": "rate_limited"}, headers={"Retry-After": "7", "X-Other": "1"})
    ).fetch(WINDOW)
    assert observation.poll_class is PollClass.THROTTLED
    assert observation.status == 429
    assert observation.retry_headers == (("retry-after", "7"),)
    assert observation.counts is None


def test_429_without_retry_after_is_still_throttled() -> None:
    observation = mainframe(answer(429, {})).fetch(WINDOW)
    assert observation.poll_class is PollClass.THROTTLED
    assert observation.retry_headers == ()


def test_503_with_retry_after_is_throttled_and_keeps_an_http_date() -> None:
    date = "Sun, 27 Sep 2026 10:16:00 GMT"
    observation = mainframe(answer(503, b"", headers={"Retry-After": date})).fetch(WINDOW)
    assert observation.poll_class is PollClass.THROTTLED
    assert observation.status == 503
    assert observation.retry_headers == (("retry-after", date),)


@pytest.mark.parametrize(
    ("status", "poll_class"),
    [
        (503, PollClass.SERVER_ERROR),  # without Retry-After
        (500, PollClass.SERVER_ERROR),
        (502, PollClass.SERVER_ERROR),
        (401, PollClass.AUTH_ERROR),
        (403, PollClass.AUTH_ERROR),
        (400, PollClass.CLIENT_ERROR),
        (404, PollClass.CLIENT_ERROR),
        (422, PollClass.CLIENT_ERROR),
        (301, PollClass.HTTP_ERROR),  # a redirect is never followed
        (204, PollClass.HTTP_ERROR),
    ],
)
def test_each_other_status_has_its_own_class(status: int, poll_class: PollClass) -> None:
    headers = {"Location": "http://elsewhere.test/"} if status == 301 else {}
    observation = mainframe(answer(status, b"", headers=headers)).fetch(WINDOW)
    assert observation.poll_class is poll_class
    assert observation.status == status
    assert observation.counts is None


@pytest.mark.parametrize(
    ("error", "poll_class"),
    [
        (httpx.ConnectError("connection refused"), PollClass.CONNECTION_ERROR),
        (httpx.ReadTimeout("timed out"), PollClass.TIMEOUT),
        (httpx.ConnectTimeout("timed out"), PollClass.TIMEOUT),
        (httpx.RemoteProtocolError("peer closed"), PollClass.CONNECTION_ERROR),
        (httpx.ReadError("reset"), PollClass.CONNECTION_ERROR),
    ],
)
def test_trouble_on_the_wire_is_classified_never_raised(
    error: Exception, poll_class: PollClass
) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        raise error

    observation = mainframe(handle).fetch(WINDOW)
    assert observation.poll_class is poll_class
    assert observation.status is None
    assert error.__class__.__name__ in observation.detail


def test_a_body_that_cannot_be_decoded_is_malformed() -> None:
    observation = mainframe(
        answer(200, b"not gzip at all", headers={"Content-Encoding": "gzip"})
    ).fetch(WINDOW)
    assert observation.poll_class is PollClass.MALFORMED


# --- Prometheus -------------------------------------------------------------------------


def vector(*values: str) -> dict[str, Any]:
    result = [
        {"metric": {"sink": f"s{i}"}, "value": [1790000000.0, value]}
        for i, value in enumerate(values)
    ]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def prometheus(
    answers: dict[str, Any], seen: list[httpx.Request] | None = None
) -> PrometheusSource:
    """A Prometheus whose answer depends on the query: `answers[query]` is a body or a
    (status, body, headers) triple."""

    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        got = answers[request.url.params["query"]]
        status, body, headers = got if isinstance(got, tuple) else (200, got, {})
        if isinstance(body, bytes):
            return httpx.Response(status, content=body, headers=headers)
        return httpx.Response(status, json=body, headers=headers)

    client = httpx.Client(transport=httpx.MockTransport(handle))
    return PrometheusSource("http://prom.test", "attempts", "failures", client=client)


def test_prometheus_sums_both_vectors_at_the_window_end() -> None:
    seen: list[httpx.Request] = []
    source = prometheus({"attempts": vector("30", "10"), "failures": vector("2", "1")}, seen)

    assert source.fetch(WINDOW) == Observation.of(40, 3)

    assert [r.url.path for r in seen] == ["/api/v1/query", "/api/v1/query"]
    assert [r.url.params["query"] for r in seen] == ["attempts", "failures"]
    assert {r.url.params["time"] for r in seen} == {str(WINDOW.end_us // 1_000_000)}


def test_prometheus_rounds_extrapolated_increases() -> None:
    source = prometheus({"attempts": vector("39.9999"), "failures": vector("3.2")})
    assert source.fetch(WINDOW) == Observation.of(40, 3)


def test_prometheus_accepts_a_scalar() -> None:
    scalar = {"status": "success", "data": {"resultType": "scalar", "result": [1.0, "5"]}}
    source = prometheus({"attempts": scalar, "failures": vector("0")})
    assert source.fetch(WINDOW) == Observation.of(5, 0)


def test_an_empty_result_is_missing_partial_never_zero() -> None:
    empty = {"status": "success", "data": {"resultType": "vector", "result": []}}
    for answers in (
        {"attempts": empty, "failures": vector("1")},
        {"attempts": vector("10"), "failures": empty},
    ):
        observation = prometheus(answers).fetch(WINDOW)
        assert observation.poll_class is PollClass.PARTIAL
        assert "missing" in observation.detail
        assert observation.counts is None


def test_prometheus_warnings_make_the_answer_partial() -> None:
    warned = {**vector("10"), "warnings": ["PromQL info: some shards did not answer"]}
    observation = prometheus({"attempts": warned, "failures": vector("1")}).fetch(WINDOW)
    assert observation.poll_class is PollClass.PARTIAL


def test_a_non_success_status_is_partial() -> None:
    failed = {"status": "error", "errorType": "timeout", "error": "query timed out"}
    observation = prometheus({"attempts": vector("10"), "failures": failed}).fetch(WINDOW)
    assert observation.poll_class is PollClass.PARTIAL
    assert "timeout" in observation.detail


@pytest.mark.parametrize(
    "body",
    [
        vector("NaN"),
        vector("+Inf"),
        vector("-Inf"),
        vector("-1"),
        vector("1", "-3"),
        vector("ten"),
        {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, 2]}]}},
        {"status": "success", "data": {"resultType": "vector", "result": ["x"]}},
        {"status": "success", "data": {"resultType": "matrix", "result": []}},
        {"status": "success", "data": {"resultType": "string", "result": [1, "3"]}},
        {"status": "success", "data": {"resultType": "scalar", "result": [1, "NaN"]}},
        {"status": "success", "data": {"resultType": "scalar", "result": "3"}},
        {"status": "success", "data": {"resultType": "vector", "result": {}}},
        {"status": "success"},
        {"status": "success", "data": []},
        {"data": {}},
        [],
        b"<html>proxy error</html>",
    ],
)
def test_a_malformed_query_answer_is_malformed(body: Any) -> None:
    observation = prometheus({"attempts": body, "failures": vector("1")}).fetch(WINDOW)
    assert observation.poll_class is PollClass.MALFORMED
    assert observation.counts is None


def test_failures_above_attempts_are_malformed() -> None:
    observation = prometheus({"attempts": vector("2"), "failures": vector("3")}).fetch(WINDOW)
    assert observation.poll_class is PollClass.MALFORMED


def test_a_refused_first_query_skips_the_second() -> None:
    seen: list[httpx.Request] = []
    answers = {"attempts": (429, {}, {"Retry-After": "3"}), "failures": vector("1")}
    observation = prometheus(answers, seen).fetch(WINDOW)
    assert observation.poll_class is PollClass.THROTTLED
    assert observation.retry_headers == (("retry-after", "3"),)
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("status", "headers", "poll_class"),
    [
        (429, {}, PollClass.THROTTLED),
        (503, {"Retry-After": "5"}, PollClass.THROTTLED),
        (503, {}, PollClass.SERVER_ERROR),
        (400, {}, PollClass.CLIENT_ERROR),
        (422, {}, PollClass.CLIENT_ERROR),
    ],
)
def test_prometheus_refusals_and_errors_on_the_second_query(
    status: int, headers: dict[str, str], poll_class: PollClass
) -> None:
    body = {"status": "error", "errorType": "bad_data", "error": "nope"}
    answers = {"attempts": vector("10"), "failures": (status, body, headers)}
    observation = prometheus(answers).fetch(WINDOW)
    assert observation.poll_class is poll_class
    assert observation.status == status


def test_prometheus_transport_error_is_classified() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no route to host")

    client = httpx.Client(transport=httpx.MockTransport(handle))
    source = PrometheusSource("http://prom.test", "a", "f", client=client, token="t")
    assert source.fetch(WINDOW).poll_class is PollClass.CONNECTION_ERROR


def test_prometheus_sends_a_bearer_token_when_configured() -> None:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return httpx.Response(200, json=vector("1"))

    client = httpx.Client(transport=httpx.MockTransport(handle))
    PrometheusSource("http://prom.test", "a", "f", client=client, token="t").fetch(WINDOW)
    assert seen == ["Bearer t", "Bearer t"]

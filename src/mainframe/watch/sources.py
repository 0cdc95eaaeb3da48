"""Where the watcher's counts come from. Each source turns one HTTP exchange about a closed
window into an Observation with a failure class; it never raises for trouble on the wire.

Two sources: Mainframe's own `GET /api/v1/deliveries/stats` and the Prometheus HTTP query
API. Only an answer that is whole, well-formed and about the window asked for is COMPLETE:
a refusal, a partial answer, an empty Prometheus result or a malformed body is never zero."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import httpx

from mainframe import __version__
from mainframe.clock import MICROS, parse_rfc3339, rfc3339
from mainframe.watch.observations import Observation, PollClass
from mainframe.watch.ports import DEFAULT_SOURCE
from mainframe.watch.windows import Window

# Largest response body read; anything bigger is refused unread as MALFORMED. A stats answer
# is ~150 bytes and an aggregated Prometheus vector a few KiB.
MAX_RESPONSE_BYTES = 1024 * 1024
DEFAULT_TIMEOUT_S = 10.0
STATS_PATH = "/api/v1/deliveries/stats"
QUERY_PATH = "/api/v1/query"
USER_AGENT = f"mainframe-watch/{__version__}"
# Response headers kept on a refusal, for the engine's backoff and for the log.
RETRY_HEADERS = frozenset({"retry-after", "ratelimit", "ratelimit-policy", "ratelimit-reset"})
# Longest detail text kept on an observation (it is logged and stored, never a label).
MAX_DETAIL = 200


class _Http:
    """A bounded GET shared by both sources: one attempt, no redirects, at most
    MAX_RESPONSE_BYTES read. Returns the response and its body, or the Observation that
    already settles the poll (transport error, refusal, other status, oversized body)."""

    def __init__(self, client: httpx.Client | None, timeout: float) -> None:
        self._client = client or httpx.Client(timeout=timeout)
        self._owns_client = client is None
        self._timeout = timeout

    def get(
        self, url: str, params: Mapping[str, str], headers: Mapping[str, str]
    ) -> tuple[httpx.Response, bytes] | Observation:
        request_headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **headers}
        try:
            with self._client.stream(
                "GET",
                url,
                params=dict(params),
                headers=request_headers,
                timeout=self._timeout,
                follow_redirects=False,
            ) as response:
                refusal = _refusal(response)
                if refusal is not None:
                    return refusal
                body = _read_bounded(response)
        except httpx.DecodingError as exc:
            return Observation(PollClass.MALFORMED, status=None, detail=_detail(exc))
        except httpx.TimeoutException as exc:  # connect, read, write or pool
            return Observation(PollClass.TIMEOUT, detail=_detail(exc))
        except httpx.RequestError as exc:  # refused, reset, TLS, DNS, a broken exchange
            return Observation(PollClass.CONNECTION_ERROR, detail=_detail(exc))
        if body is None:
            detail = f"response larger than {MAX_RESPONSE_BYTES} bytes"
            return Observation(PollClass.MALFORMED, status=response.status_code, detail=detail)
        return response, body

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


def _refusal(response: httpx.Response) -> Observation | None:
    """Any answer but 200, classified by `status_class`."""
    status = response.status_code
    if status == 200:
        return None
    kept = tuple((k.lower(), v) for k, v in response.headers.items() if k.lower() in RETRY_HEADERS)
    retry_after = any(name == "retry-after" for name, _ in kept)
    poll_class = status_class(status, retry_after=retry_after)
    return Observation(poll_class, status=status, retry_headers=kept, detail=f"HTTP {status}")


def status_class(status: int, *, retry_after: bool) -> PollClass:
    """429 and a 503 with Retry-After are refusals to wait out; 401/403 a credential only a
    person can fix; other 4xx a request that is wrong; other 5xx a server worth asking again
    soon; anything else (a redirect, which is never followed) breaks the contract."""
    if status == 429 or (status == 503 and retry_after):
        return PollClass.THROTTLED
    if status in (401, 403):
        return PollClass.AUTH_ERROR
    if 400 <= status < 500:
        return PollClass.CLIENT_ERROR
    if 500 <= status < 600:
        return PollClass.SERVER_ERROR
    return PollClass.HTTP_ERROR


def _read_bounded(response: httpx.Response) -> bytes | None:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        return None
    chunks: list[bytes] = []
    seen = 0
    for chunk in response.iter_bytes():
        seen += len(chunk)
        if seen > MAX_RESPONSE_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _detail(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{exc.__class__.__name__}: {text}"[:MAX_DETAIL]


def _malformed(detail: str) -> Observation:
    return Observation(PollClass.MALFORMED, status=200, detail=detail[:MAX_DETAIL])


def _json(body: bytes) -> Any | Observation:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        return _malformed(f"body is not JSON: {exc}")


def _count(payload: Mapping[str, Any], field: str) -> int | None:
    value = payload.get(field)
    # bool is an int subclass: `true` is not a count.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _instant(text: Any) -> int | None:
    return parse_rfc3339(text) if isinstance(text, str) else None


class MainframeSource:
    """Mainframe's windowed delivery-stats API, read with an owner token. The answer must
    echo the window asked for, carry two non-negative integer counts and `complete: true`."""

    # HTTP requests one poll sends, each taken from the source's quota.
    requests_per_poll = 1

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        name: str = DEFAULT_SOURCE,
        client: httpx.Client | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.name = name
        self.timeout_s = timeout
        self._url = base_url.rstrip("/") + STATS_PATH
        self._token = token
        self._http = _Http(client, timeout)

    def fetch(self, window: Window) -> Observation:
        params = {
            "start": rfc3339(window.start_us, precision="auto"),
            "end": rfc3339(window.end_us, precision="auto"),
        }
        got = self._http.get(self._url, params, {"Authorization": f"Bearer {self._token}"})
        if isinstance(got, Observation):
            return got
        payload = _json(got[1])
        if isinstance(payload, Observation):
            return payload
        return classify_stats(payload, window)

    def close(self) -> None:
        self._http.close()


def classify_stats(payload: Any, window: Window) -> Observation:
    """Classify a 200 body of the stats API for `window`."""
    if not isinstance(payload, dict):
        return _malformed("body is not a JSON object")
    attempts, failures = _count(payload, "attempts"), _count(payload, "failures")
    if attempts is None or failures is None:
        return _malformed("attempts and failures must be non-negative integers")
    if failures > attempts:
        return _malformed("failures exceed attempts")
    complete = payload.get("complete")
    if not isinstance(complete, bool):
        return _malformed("complete must be true or false")
    # An answer about another window (a cache, a proxy, a server bug) is not evidence.
    if (_instant(payload.get("start")), _instant(payload.get("end"))) != (
        window.start_us,
        window.end_us,
    ):
        return _malformed("start and end do not echo the window asked for")
    if not complete:
        return Observation(PollClass.PARTIAL, status=200, detail="complete: false")
    return Observation.of(attempts, failures)


class PrometheusSource:
    """Two PromQL instant queries evaluated at the window's end, one for attempts and one
    for failures. Both must succeed for a COMPLETE observation.

    An empty result vector is MISSING and classified PARTIAL, never zero: Prometheus returns
    nothing both when nothing happened and when the series is not scraped at all (a target
    down, a relabel mistake, a renamed metric), and the two cannot be told apart. An
    operator who means "no series is zero" says so in the query with `or vector(0)`."""

    requests_per_poll = 2  # the attempts query, then the failures query

    def __init__(
        self,
        base_url: str,
        attempts_query: str,
        failures_query: str,
        *,
        name: str = DEFAULT_SOURCE,
        client: httpx.Client | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        token: str | None = None,
    ) -> None:
        self.name = name
        self.timeout_s = timeout
        self._url = base_url.rstrip("/") + QUERY_PATH
        self._queries = (("attempts", attempts_query), ("failures", failures_query))
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = _Http(client, timeout)

    def fetch(self, window: Window) -> Observation:
        seconds, fraction = divmod(window.end_us, MICROS)
        at = f"{seconds}.{fraction:06d}" if fraction else str(seconds)
        values: list[int] = []
        for role, query in self._queries:
            got = self._http.get(self._url, {"query": query, "time": at}, self._headers)
            if isinstance(got, Observation):
                return got
            payload = _json(got[1])
            if isinstance(payload, Observation):
                return payload
            value = classify_query(payload, role)
            if isinstance(value, Observation):
                return value
            values.append(value)
        attempts, failures = values
        if failures > attempts:
            return _malformed("failures exceed attempts")
        return Observation.of(attempts, failures)

    def close(self) -> None:
        self._http.close()


def classify_query(payload: Any, role: str) -> int | Observation:
    """The count a 200 body of `/api/v1/query` carries, or the Observation that says why
    it carries none."""
    if not isinstance(payload, dict) or not isinstance(payload.get("status"), str):
        return _malformed(f"{role}: not a Prometheus API response")
    if payload["status"] != "success":
        kind = payload.get("errorType")
        return _partial(f"{role}: status {payload['status']!r} ({kind})")
    if payload.get("warnings"):
        return _partial(f"{role}: Prometheus warned the result may be incomplete")
    data = payload.get("data")
    if not isinstance(data, dict):
        return _malformed(f"{role}: data is missing")
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        sample = _sample(result)
        return _malformed(f"{role}: bad scalar") if sample is None else _rounded(sample, role)
    if kind != "vector" or not isinstance(result, list):
        return _malformed(f"{role}: result type {kind!r}, expected a vector or scalar")
    if not result:
        return _partial(f"{role}: missing (empty result vector), not zero")
    total = 0.0
    for series in result:
        sample = _sample(series.get("value") if isinstance(series, dict) else None)
        if sample is None:
            return _malformed(f"{role}: a sample is not a [time, value] pair")
        total += sample
    return _rounded(total, role)


def _partial(detail: str) -> Observation:
    return Observation(PollClass.PARTIAL, status=200, detail=detail[:MAX_DETAIL])


def _sample(pair: Any) -> float | None:
    # Prometheus renders sample values as strings ("1", "NaN", "+Inf"), never numbers.
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        return None
    try:
        return float(pair[1])
    except ValueError:
        return None


def _rounded(value: float, role: str) -> int | Observation:
    if not math.isfinite(value) or value < 0:
        return _malformed(f"{role}: value {value!r} is not a count")
    # increase() extrapolates to the range edges, so a count of 3 may read 2.9999 or 3.2.
    return round(value)

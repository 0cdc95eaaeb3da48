"""The worker SDK against an in-memory fake of the server's job API (httpx.MockTransport)."""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import replace

import httpx
import pytest

from mainframe.client import (
    Client,
    ItemStatus,
    MainframeError,
    ResultReport,
    StaleAssignment,
    parse_timestamp,
)
from mainframe.client.testing import BASE_URL, TOKEN, FakeMainframe

Handler = Callable[[httpx.Request], httpx.Response]


def failing_first(handler: Handler, failures: int) -> Handler:
    """Wrap a handler so that its first `failures` requests never reach the server."""
    calls = itertools.count()

    def handle(request: httpx.Request) -> httpx.Response:
        if next(calls) < failures:
            raise httpx.ConnectError("connection refused", request=request)
        return handler(request)

    return handle


@pytest.fixture
def fake() -> FakeMainframe:
    return FakeMainframe()


def test_lease_returns_typed_jobs_with_their_assignment(fake: FakeMainframe) -> None:
    fake.submit("requests", "2.32.0", payload={"urls": ["https://files.example/r.whl"]})
    fake.submit("numpy", "2.1.0", queue="priority")
    with fake.client() as client:
        jobs = client.lease(batch=5)
    assert [(job.name, job.version, job.queue) for job in jobs] == [
        ("requests", "2.32.0", "default"),
        ("numpy", "2.1.0", "priority"),
    ]
    first = jobs[0]
    assert first.payload == {"urls": ["https://files.example/r.whl"]}
    assert first.attempt == 1
    assert first.assignment_id == fake.scans[first.scan_id].assignment_id
    assert parse_timestamp(first.lease_expires_at).timestamp() > time.time()


def test_lease_is_empty_when_nothing_is_eligible(fake: FakeMainframe) -> None:
    with fake.client() as client:
        assert client.lease() == []


def test_lease_refuses_a_batch_the_server_would_reject(fake: FakeMainframe) -> None:
    with fake.client() as client, pytest.raises(ValueError, match="between 1 and 100"):
        client.lease(batch=101)
    assert fake.requests == []


def test_lease_retries_transport_errors_with_backoff(fake: FakeMainframe) -> None:
    fake.submit("requests")
    sleeps: list[float] = []
    transport = httpx.MockTransport(failing_first(fake.handle, failures=2))
    with Client(BASE_URL, TOKEN, transport=transport, sleep=sleeps.append) as client:
        jobs = client.lease()
    assert [job.name for job in jobs] == ["requests"]
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0


def test_lease_gives_up_after_a_few_transport_errors(fake: FakeMainframe) -> None:
    sleeps: list[float] = []
    transport = httpx.MockTransport(failing_first(fake.handle, failures=10))
    with (
        Client(BASE_URL, TOKEN, transport=transport, sleep=sleeps.append) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.lease()
    assert len(sleeps) == 3
    for n, slept in enumerate(sleeps):  # half of 0.5 * 2**n fixed, half jitter
        assert 0.25 * 2**n <= slept <= 0.5 * 2**n


def test_clients_cut_off_together_do_not_retry_in_lockstep(fake: FakeMainframe) -> None:
    first_waits = set()
    for seed in range(8):
        sleeps: list[float] = []
        transport = httpx.MockTransport(failing_first(fake.handle, failures=1))
        rng = random.Random(seed)
        with Client(BASE_URL, TOKEN, transport=transport, sleep=sleeps.append, rng=rng) as c:
            c.lease()
        first_waits.add(round(sleeps[0], 6))
    assert len(first_waits) == 8


def test_a_bad_token_is_an_error_with_the_status(fake: FakeMainframe) -> None:
    with fake.client(token="wrong") as client, pytest.raises(MainframeError) as raised:
        client.lease()
    assert raised.value.status == 401
    assert raised.value.body == {"error": "unauthorized"}


def test_report_echoes_the_assignment_and_returns_the_scan(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        scan = client.report(job, ResultReport("finished", summary="clean", artifact="s3://r/1"))
    assert scan["status"] == "FINISHED"
    assert fake.posted("/result") == [
        {
            "outcome": "finished",
            "attempt": 1,
            "assignment_id": job.assignment_id,
            "summary": "clean",
            "artifact": "s3://r/1",
        }
    ]


@pytest.mark.parametrize(
    ("retryable", "status"), [(True, "QUEUED"), (False, "FAILED")], ids=["retryable", "permanent"]
)
def test_a_failure_says_whether_to_retry(fake: FakeMainframe, retryable: bool, status: str) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        client.report(job, ResultReport("failed", retryable=retryable, result={"exit": 3}))
    assert fake.posted("/result")[0]["retryable"] is retryable
    assert fake.posted("/result")[0]["result"] == {"exit": 3}
    assert fake.scans[job.scan_id].status == status


def test_a_stale_result_raises_with_the_code_and_is_sent_once(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        fake.reassign(job.scan_id)
        with pytest.raises(StaleAssignment) as raised:
            client.report(job, ResultReport("finished"))
    assert (raised.value.status, raised.value.code) == (409, "stale_assignment")
    assert len(fake.posted("/result")) == 1
    assert fake.scans[job.scan_id].status == "PENDING"


def test_the_same_result_sent_again_gets_the_first_answer(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        first = client.report(job, ResultReport("finished", summary="clean"))
        assert client.report(job, ResultReport("finished", summary="clean")) == first


def test_another_result_for_the_same_assignment_is_a_conflict(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        client.report(job, ResultReport("finished"))
        with pytest.raises(StaleAssignment, match="result_conflict") as refused:
            client.report(job, ResultReport("failed"))
        assert refused.value.code == "result_conflict"
        assert fake.scans[job.scan_id].status == "FINISHED", "the conflict changed nothing"


def test_a_result_for_a_finished_scan_under_another_assignment_is_already_terminal(
    fake: FakeMainframe,
) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        client.report(job, ResultReport("finished"))
        stale = replace(job, assignment_id=job.assignment_id + "-old")
        with pytest.raises(StaleAssignment, match="already_terminal"):
            client.report(stale, ResultReport("failed"))


def test_a_result_is_not_retried_on_transport_errors(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
    transport = httpx.MockTransport(failing_first(fake.handle, failures=1))
    with Client(BASE_URL, TOKEN, transport=transport) as client, pytest.raises(httpx.ConnectError):
        client.report(job, ResultReport("finished"))
    assert fake.scans[job.scan_id].status == "PENDING"


def test_an_unknown_scan_is_a_404_error(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        ghost = dataclasses.replace(job, scan_id=999)
        with pytest.raises(MainframeError) as raised:
            client.heartbeat(ghost)
    assert raised.value.status == 404
    assert not isinstance(raised.value, StaleAssignment)


def test_report_many_answers_each_result_in_order(fake: FakeMainframe) -> None:
    for name in ("a", "b", "c"):
        fake.submit(name)
    with fake.client() as client:
        a, b, c = client.lease(batch=3)
        fake.reassign(b.scan_id)
        statuses = client.report_many(
            [
                (a, ResultReport("finished")),
                (b, ResultReport("finished")),
                (c, ResultReport("failed", retryable=False)),
            ]
        )
    assert statuses == [
        ItemStatus(a.scan_id, 200),
        ItemStatus(b.scan_id, 409, "stale_assignment", "not the current assignment"),
        ItemStatus(c.scan_id, 200),
    ]
    assert [item["scan_id"] for item in fake.posted("/results")[0]["results"]] == [1, 2, 3]
    assert [fake.scans[job.scan_id].status for job in (a, b, c)] == [
        "FINISHED",
        "PENDING",
        "FAILED",
    ]


def test_report_many_of_nothing_sends_nothing(fake: FakeMainframe) -> None:
    with fake.client() as client:
        assert client.report_many([]) == []
    assert fake.requests == []


def test_heartbeat_extends_the_lease(fake: FakeMainframe) -> None:
    fake.lease_seconds = 1.0
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        fake.lease_seconds = 120.0
        expires_at = client.heartbeat(job)
    assert parse_timestamp(expires_at) > parse_timestamp(job.lease_expires_at)
    assert fake.posted("/heartbeat") == [job.assignment()]


def test_a_heartbeat_for_a_reassigned_scan_is_stale(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        fake.reassign(job.scan_id)
        with pytest.raises(StaleAssignment, match="stale_assignment"):
            client.heartbeat(job)


def test_wait_then_resume_parks_and_unparks_the_scan(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        client.wait(job, 600, "sandbox run")
        assert fake.scans[job.scan_id].waiting
        client.resume(job)
    assert not fake.scans[job.scan_id].waiting
    assert fake.posted("/wait") == [{**job.assignment(), "seconds": 600, "reason": "sandbox run"}]
    assert fake.posted("/resume") == [job.assignment()]


def test_wait_on_a_finished_scan_is_already_terminal(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client() as client:
        (job,) = client.lease()
        client.report(job, ResultReport("finished"))
        with pytest.raises(StaleAssignment, match="already_terminal"):
            client.wait(job, 60, "review")


def test_a_malformed_lease_answer_is_an_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[{"scan_id": 1, "name": "requests"}])

    with (
        Client(BASE_URL, TOKEN, transport=httpx.MockTransport(handler)) as client,
        pytest.raises(MainframeError, match="requests"),
    ):
        client.lease()


# Complete-and-fetch: a result reported with `?next=N` brings up to N newly leased jobs.


def answer_lost_once(handler: Handler, suffix: str) -> Handler:
    """Wrap a handler so that the first request to a path ending in `suffix` reaches the server,
    which acts on it, but its answer never comes back."""
    lost: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        response = handler(request)
        if request.url.path.endswith(suffix) and not lost:
            lost.append(request.url.path)
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response

    return handle


def backlog(fake: FakeMainframe, *names: str) -> None:
    for name in names:
        fake.submit(name)


def queued(fake: FakeMainframe) -> list[str]:
    return [scan.name for scan in fake.scans.values() if scan.status == "QUEUED"]


def test_complete_reports_and_leases_the_next_jobs_in_one_request(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b", "c", "d")
    with fake.client() as client:
        (a,) = client.lease()
        done = client.complete(a, ResultReport("finished"), next=2)
    assert done.scan["status"] == "FINISHED" and "next" not in done.scan
    assert [(job.name, job.attempt) for job in done.jobs] == [("b", 1), ("c", 1)]
    assert [job.assignment_id for job in done.jobs] == [
        fake.scans[job.scan_id].assignment_id for job in done.jobs
    ]
    assert queued(fake) == ["d"]
    assert [path for path, _ in fake.requests] == [
        "/api/v1/jobs",
        f"/api/v1/jobs/{a.scan_id}/result",
    ]


def test_complete_with_next_zero_leases_nothing(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b")
    with fake.client() as client:
        (a,) = client.lease()
        done = client.complete(a, ResultReport("finished"), next=0)
    assert done.scan["status"] == "FINISHED" and done.jobs == []
    assert queued(fake) == ["b"]


def test_complete_refuses_a_next_the_server_would_reject(fake: FakeMainframe) -> None:
    fake.submit("a")
    with fake.client() as client:
        (a,) = client.lease()
        with pytest.raises(ValueError, match="between 0 and 100"):
            client.complete(a, ResultReport("finished"), next=101)
    assert fake.posted("/result") == []


@pytest.mark.parametrize("value", ["abc", "101", "-1", "", "\u0661", "1.0"])
def test_the_fake_refuses_a_bad_next_naming_it(fake: FakeMainframe, value: str) -> None:
    scan = fake.submit("a")
    with fake.client() as client:
        (a,) = client.lease()
        for path, body in [
            (f"/api/v1/jobs/{a.scan_id}/result", {**a.assignment(), "outcome": "finished"}),
            ("/api/v1/jobs/results", {"results": [{"scan_id": a.scan_id, **a.assignment()}]}),
        ]:
            with pytest.raises(MainframeError) as refused:
                client._post(path, json=body, params={"next": value})
            assert refused.value.status == 422
            assert refused.value.body["detail"][0]["field"] == "query.next"
    assert scan.status == "PENDING" and scan.results == []


def test_a_lost_answer_is_replayed_with_the_same_jobs_and_no_second_lease(
    fake: FakeMainframe,
) -> None:
    backlog(fake, "a", "b", "c")
    with fake.client() as client:
        (a,) = client.lease()
    sleeps: list[float] = []
    transport = httpx.MockTransport(answer_lost_once(fake.handle, "/result"))
    with Client(BASE_URL, TOKEN, transport=transport, sleep=sleeps.append) as client:
        done = client.complete(a, ResultReport("finished"), next=1)
    assert len(fake.posted("/result")) == 2 and len(sleeps) == 1  # sent twice, no 409
    assert done.scan["status"] == "FINISHED" and len(fake.scans[a.scan_id].results) == 1
    (b,) = done.jobs
    assert (b.name, b.attempt, b.assignment_id) == ("b", 1, fake.scans[b.scan_id].assignment_id)
    assert queued(fake) == ["c"]  # the repeat leased nothing more


def test_a_repeated_completion_gets_the_first_answer(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b", "c")
    with fake.client() as client:
        (a,) = client.lease()
        first = client.complete(a, ResultReport("failed", retryable=False), next=1)
        again = client.complete(a, ResultReport("failed", retryable=False), next=1)
    assert again == first
    assert first.scan["status"] == "FAILED" and len(first.jobs) == 1
    assert queued(fake) == ["c"]


def test_a_repeat_leaves_out_jobs_no_longer_held(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b", "c", "d")
    with fake.client() as client:
        (a,) = client.lease()
        b, c = client.complete(a, ResultReport("finished"), next=2).jobs
        fake.reassign(b.scan_id)  # b's lease lapsed and went to another worker
        client.complete(c, ResultReport("finished"), next=0)  # c is done
        again = client.complete(a, ResultReport("finished"), next=2)
    assert again.jobs == [] and again.scan["status"] == "FINISHED"
    assert queued(fake) == ["d"]


def test_a_refused_completion_leases_nothing_and_is_sent_once(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b")
    with fake.client() as client:
        (a,) = client.lease()
        fake.reassign(a.scan_id)
        with pytest.raises(StaleAssignment) as stale:
            client.complete(a, ResultReport("finished"), next=1)
    assert stale.value.code == "stale_assignment"
    assert len(fake.posted("/result")) == 1
    assert queued(fake) == ["b"]


def test_a_plain_report_repeating_a_completion_gets_its_answer(fake: FakeMainframe) -> None:
    fake.submit("a")
    with fake.client() as client:
        (a,) = client.lease()
        done = client.complete(a, ResultReport("finished"), next=0)
        assert client.report(a, ResultReport("finished")) == done.scan


def test_complete_gives_up_after_a_few_transport_errors(fake: FakeMainframe) -> None:
    fake.submit("a")
    with fake.client() as client:
        (a,) = client.lease()
    sleeps: list[float] = []
    transport = httpx.MockTransport(failing_first(fake.handle, failures=10))
    with (
        Client(BASE_URL, TOKEN, transport=transport, sleep=sleeps.append) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.complete(a, ResultReport("finished"))
    assert len(sleeps) == 3
    assert fake.scans[a.scan_id].status == "PENDING"


def test_a_server_without_next_completes_with_no_jobs(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b")

    def older_server(request: httpx.Request) -> httpx.Response:
        # A server that predates `?next=`: it ignores the parameter.
        url = request.url.copy_remove_param("next")
        return fake.handle(
            httpx.Request(request.method, url, headers=request.headers, content=request.content)
        )

    with Client(BASE_URL, TOKEN, transport=httpx.MockTransport(older_server)) as client:
        (a,) = client.lease()
        done = client.complete(a, ResultReport("finished"), next=1)
    assert done.scan["status"] == "FINISHED" and done.jobs == []
    assert queued(fake) == ["b"]


def test_complete_many_answers_each_item_and_leases_the_next_jobs(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b", "c", "d", "e")
    with fake.client() as client:
        a, b, c = client.lease(batch=3)
        fake.reassign(b.scan_id)
        done = client.complete_many(
            [
                (a, ResultReport("finished")),
                (b, ResultReport("finished")),
                (c, ResultReport("failed", retryable=False)),
            ],
            next=3,
        )
    assert done.statuses == [
        ItemStatus(a.scan_id, 200),
        ItemStatus(b.scan_id, 409, "stale_assignment", "not the current assignment"),
        ItemStatus(c.scan_id, 200),
    ]
    assert [(job.name, job.attempt) for job in done.jobs] == [("d", 1), ("e", 1)]  # all there is
    assert len(fake.requests) == 2


def test_complete_many_with_every_item_refused_leases_nothing(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b")
    with fake.client() as client:
        (a,) = client.lease()
        fake.reassign(a.scan_id)
        done = client.complete_many([(a, ResultReport("finished"))], next=1)
    assert [status.status for status in done.statuses] == [409] and done.jobs == []
    assert queued(fake) == ["b"]


def test_a_batch_with_a_repeated_item_gets_its_jobs_and_no_new_lease(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b", "c", "d", "e")
    with fake.client() as client:
        a, b = client.lease(batch=2)
        first = client.complete_many([(a, ResultReport("finished"))], next=2)
        # The answer was lost; the worker sends a again, now beside b's result.
        again = client.complete_many(
            [(a, ResultReport("finished")), (b, ResultReport("finished"))], next=2
        )
    assert [status.status for status in again.statuses] == [200, 200]
    assert again.jobs == first.jobs and [job.name for job in first.jobs] == ["c", "d"]
    assert fake.scans[b.scan_id].status == "FINISHED"
    assert queued(fake) == ["e"]


def test_a_lost_batch_answer_is_replayed_with_the_same_jobs(fake: FakeMainframe) -> None:
    backlog(fake, "a", "b", "c", "d")
    with fake.client() as client:
        a, b = client.lease(batch=2)
    transport = httpx.MockTransport(answer_lost_once(fake.handle, "/results"))
    with Client(BASE_URL, TOKEN, transport=transport, sleep=lambda _: None) as client:
        done = client.complete_many(
            [(a, ResultReport("finished")), (b, ResultReport("finished"))], next=2
        )
    assert [status.status for status in done.statuses] == [200, 200]
    assert [(job.name, job.attempt) for job in done.jobs] == [("c", 1), ("d", 1)]
    assert len(fake.posted("/results")) == 2 and queued(fake) == []


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (401, {"error": "unauthorized", "detail": "unknown token"}, "unknown token (unauthorized)"),
        (
            422,
            {"error": "invalid_request", "detail": [
                {"field": "body.scans.3.name", "message": "Field required"},
                {"field": "body.outcome", "message": "Input should be 'finished' or 'failed'"},
            ]},
            "name: Field required; outcome: Input should be 'finished' or 'failed' "
            "(invalid_request)",
        ),
        (502, "<html>\n<body>Bad Gateway</body>\n</html>",
         "HTTP 502: <html> <body>Bad Gateway</body> </html>"),
        (200, {"scan_id": 1}, 'HTTP 200: {"scan_id": 1}'),
    ],
)  # fmt: skip
def test_a_refusal_reads_in_words_never_as_a_python_dict(
    status: int, body: object, words: str
) -> None:
    error = MainframeError(status, body)
    assert error.words == words
    assert str(error) == f"Mainframe answered {status}: {words}"
    assert "{'" not in str(error)

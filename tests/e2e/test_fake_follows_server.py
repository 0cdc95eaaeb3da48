"""The shipped test fake (`mainframe.client.testing`) answers as the real server does: the SDK
runs the same scenario against both and sees the same shapes, codes and lifecycle, so tests
written against the fake hold against the server. A drift in either makes this fail."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from mainframe.client import Client, Job, MainframeError, ResultReport
from mainframe.client.sdk import StaleAssignment
from mainframe.client.testing import FakeMainframe
from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli

LEASE_S = 1.0
MAX_ATTEMPTS = 2


@dataclass
class Side:
    """One implementation of the job API behind an SDK client, and how to give it work."""

    client: Client
    submit: Callable[[str], None]


def _fake() -> Iterator[Side]:
    fake = FakeMainframe(lease_seconds=LEASE_S, max_attempts=MAX_ATTEMPTS)
    with fake.client() as client:
        yield Side(client, lambda name: _discard(fake.submit(name)))


def _discard(_value: object) -> None:
    return None


def _server(tmp_path: Path) -> Iterator[Side]:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    cli(url, "db", "upgrade")  # as an operator would, before any other command
    cli(url, "owner", "create", "ops")
    cli(url, "endpoint", "create", "pypi", "--owner", "ops")
    worker = cli(url, "token", "create", "--endpoint", "pypi", "--worker", "w1")
    source = cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed")
    env = {
        "MAINFRAME_JOB_TIMEOUT": str(LEASE_S),
        "MAINFRAME_MAX_JOB_ATTEMPTS": str(MAX_ATTEMPTS),
    }
    with ServerProcess(url, tmp_path, **env) as server, Client(server.url, worker) as client:

        def submit(name: str) -> None:
            response = httpx.post(
                f"{server.url}/api/v1/scans",
                json={"name": name, "version": "1.0"},
                headers={"Authorization": f"Bearer {source}"},
            )
            assert response.status_code == 201, response.text

        yield Side(client, submit)


@pytest.fixture(params=["fake", "server"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    yield from (_fake() if request.param == "fake" else _server(tmp_path))


def test_a_finished_result_answers_the_same_shape(side: Side) -> None:
    side.submit("requests")
    [job] = side.client.lease()
    reply = side.client.report(job, ResultReport("finished"))
    assert set(reply) == {
        "scan_id",
        "status",
        "attempt_count",
        "available_at",
        "finished_at",
        "dead_lettered_at",
        "fail_reason",
    }
    assert (reply["status"], reply["attempt_count"], reply["fail_reason"]) == ("FINISHED", 1, None)
    assert reply["finished_at"].endswith("Z") and reply["dead_lettered_at"] is None


def test_a_result_sent_again_gets_the_first_answer(side: Side) -> None:
    side.submit("requests")
    [job] = side.client.lease()
    first = side.client.report(job, ResultReport("finished"))
    assert side.client.report(job, ResultReport("finished")) == first


def test_another_result_for_the_same_assignment_is_a_conflict(side: Side) -> None:
    side.submit("requests")
    [job] = side.client.lease()
    first = side.client.report(job, ResultReport("failed", retryable=False, summary="broken"))
    with pytest.raises(StaleAssignment) as conflict:
        side.client.report(job, ResultReport("finished"))
    assert conflict.value.code == "result_conflict"
    assert conflict.value.accepted is not None
    assert set(conflict.value.accepted) == {"outcome", "status", "fail_reason", "accepted_at"}
    accepted = conflict.value.accepted
    assert (accepted["outcome"], accepted["status"]) == ("failed", "FAILED")
    assert accepted["accepted_at"].endswith("Z") and first["status"] == "FAILED"


def test_another_result_for_a_finished_scan_is_already_terminal(side: Side) -> None:
    side.submit("requests")
    [job] = side.client.lease()
    side.client.report(job, ResultReport("finished"))
    other = replace(job, assignment_id=job.assignment_id + "x")
    with pytest.raises(StaleAssignment) as stale:
        side.client.report(other, ResultReport("finished"))
    assert stale.value.code == "already_terminal"


def test_a_refused_poll_has_the_one_error_shape(side: Side) -> None:
    with pytest.raises(MainframeError) as refused:
        side.client._post("/api/v1/jobs", params={"batch": 0})  # the SDK itself checks first
    assert refused.value.status == 422
    assert refused.value.body["error"] == "invalid_request"
    assert refused.value.body["detail"][0]["field"] == "query.batch"


def test_a_lease_lapsed_at_the_cap_is_dead_lettered_not_leased_again(side: Side) -> None:
    side.submit("requests")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        # Each lease lapses unreported; the next poll after it lapsed leases the scan again.
        jobs = wait_for(side.client.lease, timeout=10, what=f"attempt {attempt} leased")
        assert [job.attempt for job in jobs] == [attempt]
    lapsed = time.monotonic() + LEASE_S + 0.3
    while time.monotonic() < lapsed:  # the last lease's lapse, polled: nothing comes back
        assert side.client.lease() == []
        # Real time, the whole lapse: both sides keep leases by the wall clock, and what is
        # tested is that no poll in that span gets the spent scan back.
        time.sleep(0.05)
    assert side.client.lease() == []  # spent: never handed out again
    with pytest.raises(StaleAssignment):
        side.client.report(jobs[0], ResultReport("finished"))


# Complete-and-fetch (`?next=`): the same scenarios against the fake and a real server.
RESULT_KEYS = {
    "scan_id",
    "status",
    "attempt_count",
    "available_at",
    "finished_at",
    "dead_lettered_at",
    "fail_reason",
}


@pytest.fixture(params=["fake", "server"])
def fetch_side(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    yield from (_fake() if request.param == "fake" else _server(tmp_path))


def _result(side: Side, job: Job, *, next: str) -> Any:
    body = {**job.assignment(), "outcome": "finished"}
    return side.client._post(f"/api/v1/jobs/{job.scan_id}/result", json=body, params={"next": next})


def test_fetch_a_result_with_next_answers_in_the_result_and_poll_shapes(
    fetch_side: Side,
) -> None:
    for name in ("requests", "numpy", "left-pad"):
        fetch_side.submit(name)
    [job] = fetch_side.client.lease()
    polled = fetch_side.client._post("/api/v1/jobs", params={"batch": 1})
    reply = _result(fetch_side, job, next="1")
    assert set(reply) == RESULT_KEYS | {"next"}
    assert reply["status"] == "FINISHED"
    [fetched] = reply["next"]
    assert set(fetched) == set(polled[0]) and fetched["attempt"] == 1
    assert fetched["scan_id"] not in (job.scan_id, polled[0]["scan_id"])


def test_fetch_a_repeated_result_is_answered_as_the_first(fetch_side: Side) -> None:
    for name in ("requests", "numpy", "left-pad"):
        fetch_side.submit(name)
    [job] = fetch_side.client.lease()
    first = _result(fetch_side, job, next="1")
    assert _result(fetch_side, job, next="1") == first  # not 409, and no second lease
    assert [j.name for j in fetch_side.client.lease(batch=5)] == ["left-pad"]


def test_fetch_next_zero_and_the_batch_route(fetch_side: Side) -> None:
    for name in ("requests", "numpy"):
        fetch_side.submit(name)
    [job] = fetch_side.client.lease()
    assert _result(fetch_side, job, next="0")["next"] == []
    [other] = fetch_side.client.lease()
    body = {"results": [{"scan_id": other.scan_id, **other.assignment(), "outcome": "finished"}]}
    reply = fetch_side.client._post("/api/v1/jobs/results", json=body, params={"next": "3"})
    assert set(reply) == {"results", "next"} and reply["next"] == []
    assert [(item["scan_id"], item["status"]) for item in reply["results"]] == [
        (other.scan_id, 200)
    ]


@pytest.mark.parametrize("value", ["abc", "101", "-1"])
def test_fetch_a_bad_next_is_refused_naming_it(fetch_side: Side, value: str) -> None:
    fetch_side.submit("requests")
    [job] = fetch_side.client.lease()
    with pytest.raises(MainframeError) as refused:
        _result(fetch_side, job, next=value)
    assert refused.value.status == 422
    assert refused.value.body["detail"][0]["field"] == "query.next"

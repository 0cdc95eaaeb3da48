"""The worker loop end to end: real subprocesses against the in-memory fake of the job API."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from mainframe.client import (
    EXIT_PERMANENT_FAILURE,
    Client,
    Fate,
    MainframeError,
    ServerUnreachable,
    WorkerTally,
    report_for_exit,
    run_worker,
)
from mainframe.client.testing import BASE_URL, TOKEN, FakeMainframe


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def work(fake: FakeMainframe, command: list[str], **options: Any) -> WorkerTally:
    """Run the worker against the fake until its queue is empty (unless options say otherwise)."""
    options.setdefault("idle_exit", True)
    with fake.client() as client:
        return run_worker(BASE_URL, TOKEN, command, client=client, **options)


@pytest.fixture
def fake() -> FakeMainframe:
    return FakeMainframe()


def work_through(
    handle: Callable[[httpx.Request], httpx.Response], **options: Any
) -> tuple[WorkerTally, list[float]]:
    """Run the worker behind a transport that may fail; return what it processed and the
    pauses it took (sleep is recorded, never waited)."""
    sleeps: list[float] = []
    options.setdefault("idle_exit", True)
    transport = httpx.MockTransport(handle)
    with Client(BASE_URL, TOKEN, transport=transport, sleep=sleeps.append) as client:
        processed = run_worker(
            BASE_URL, TOKEN, python("pass"), client=client, sleep=sleeps.append, **options
        )
    return processed, sleeps


def test_a_command_that_exits_zero_finishes_the_scan(fake: FakeMainframe) -> None:
    scan = fake.submit("requests", "2.32.0")
    code = (
        "import sys\n"
        "print('scanning'); print('https://artifacts.example/requests-2.32.0.json'); print()\n"
        "print('1 warning', file=sys.stderr)"
    )
    assert work(fake, python(code)).attempts == 1
    assert scan.status == "FINISHED"
    assert scan.results == [
        {
            "outcome": "finished",
            "attempt": 1,
            "assignment_id": scan.assignment_id,
            "summary": "1 warning",
            "artifact": "https://artifacts.example/requests-2.32.0.json",
        }
    ]


@pytest.mark.parametrize(
    ("exit_code", "retryable", "status"),
    [(3, True, "QUEUED"), (75, True, "QUEUED"), (EXIT_PERMANENT_FAILURE, False, "FAILED")],
)
def test_a_failing_command_fails_the_attempt(
    fake: FakeMainframe, exit_code: int, retryable: bool, status: str
) -> None:
    scan = fake.submit("requests")
    code = f"import sys; print('boom: bad wheel', file=sys.stderr); sys.exit({exit_code})"
    assert work(fake, python(code), max_jobs=1).attempts == 1
    (result,) = scan.results
    assert (result["outcome"], result["retryable"]) == ("failed", retryable)
    assert result["summary"] == f"exit code {exit_code}\nboom: bad wheel"
    assert scan.status == status


def test_the_command_sees_the_scan_in_its_environment(fake: FakeMainframe, tmp_path: Path) -> None:
    payload = {"urls": ["https://files.example/requests-2.32.0.whl"]}
    scan = fake.submit("requests", "2.32.0", kind="malware", queue="priority", payload=payload)
    seen = tmp_path / "env.json"
    code = (
        "import json, os, sys\n"
        "env = {k: v for k, v in os.environ.items()\n"
        "       if k.startswith('MAINFRAME_SCAN_') or k == 'PATH'}\n"
        "open(sys.argv[1], 'w').write(json.dumps(env))"
    )
    work(fake, python(code, str(seen)))
    env = json.loads(seen.read_text())
    assert env.pop("PATH")  # extended, not replaced
    assert env == {
        "MAINFRAME_SCAN_ID": str(scan.scan_id),
        "MAINFRAME_SCAN_NAME": "requests",
        "MAINFRAME_SCAN_VERSION": "2.32.0",
        "MAINFRAME_SCAN_KIND": "malware",
        "MAINFRAME_SCAN_QUEUE": "priority",
        "MAINFRAME_SCAN_ATTEMPT": "1",
        "MAINFRAME_SCAN_PAYLOAD": json.dumps(payload),
    }


# Leases here are real time (the fake and the command are real); 1.2 s leases leave a loaded
# 2-core machine 0.8 s of slack per heartbeat, where 0.3 s leases left 0.2 s and flaked.
LEASE_S = 1.2


@pytest.mark.slow  # seconds of real waiting: in make test, not make check
def test_heartbeats_keep_a_slow_command_s_lease_alive() -> None:
    fake = FakeMainframe(lease_seconds=LEASE_S)  # default interval: a third of that
    scan = fake.submit("requests")
    assert work(fake, python("import time; time.sleep(2.0)")).attempts == 1
    heartbeats = fake.posted("/heartbeat")
    assert len(heartbeats) >= 3
    assert all(body == {"attempt": 1, "assignment_id": scan.assignment_id} for body in heartbeats)
    assert not scan.lapsed
    assert scan.status == "FINISHED"


def test_an_explicit_heartbeat_interval_is_honoured(fake: FakeMainframe) -> None:
    fake.submit("requests")
    work(fake, python("import time; time.sleep(0.4)"), heartbeat_interval=0.05)
    assert len(fake.posted("/heartbeat")) >= 4


def test_a_stale_heartbeat_kills_the_command_and_reports_nothing(tmp_path: Path) -> None:
    fake = FakeMainframe(lease_seconds=LEASE_S)
    scan = fake.submit("requests")
    fake.lose_on_heartbeat.add(scan.scan_id)
    marker = tmp_path / "survived"
    code = "import sys, time; time.sleep(5); open(sys.argv[1], 'w').write('done')"
    started = time.monotonic()
    with capture_logs() as logs:
        processed = work(fake, python(code, str(marker)))
    assert time.monotonic() - started < 4  # killed at the first heartbeat, not after 5 s
    assert processed.attempts == 0 and processed.fates == {scan.scan_id: Fate.UNREPORTED}
    assert processed.words() == "1 scan in 0 attempts: 1 not reported"
    assert not marker.exists()
    assert fake.posted("/result") == [] and fake.posted("/results") == []
    lost = [entry for entry in logs if entry["event"] == "job_lost"]
    assert [(entry["scan_id"], entry["code"], entry["killed"]) for entry in lost] == [
        (scan.scan_id, "stale_assignment", True)
    ]


def test_a_batch_is_run_in_turn_and_reported_in_one_request(fake: FakeMainframe) -> None:
    scans = [fake.submit(name) for name in ("alpha", "beta", "gamma")]
    code = "import os, sys; sys.exit(0 if os.environ['MAINFRAME_SCAN_NAME'] == 'alpha' else 3)"
    done = work(fake, python(code), batch=3, max_jobs=3)
    assert done.words() == "3 scans in 3 attempts: 1 finished, 2 waiting for a retry"
    assert fake.posted("/result") == []
    (batch,) = fake.posted("/results")
    assert [(item["scan_id"], item["outcome"]) for item in batch["results"]] == [
        (scans[0].scan_id, "finished"),
        (scans[1].scan_id, "failed"),
        (scans[2].scan_id, "failed"),
    ]
    assert [scan.status for scan in scans] == ["FINISHED", "QUEUED", "QUEUED"]


@pytest.mark.slow  # seconds of real waiting: in make test, not make check
def test_a_scan_lost_while_waiting_its_turn_is_neither_run_nor_reported(
    tmp_path: Path,
) -> None:
    fake = FakeMainframe(lease_seconds=LEASE_S)
    first, second = fake.submit("alpha"), fake.submit("beta")
    fake.lose_on_heartbeat.add(second.scan_id)
    ran = tmp_path / "ran"
    code = (
        "import os, sys, time\n"
        "open(sys.argv[1], 'a').write(os.environ['MAINFRAME_SCAN_NAME'] + '\\n')\n"
        "time.sleep(1.5)"  # past the second scan's first heartbeat, well inside its lease
    )
    done = work(fake, python(code, str(ran)), batch=2)
    assert done.fates == {first.scan_id: Fate.FINISHED, second.scan_id: Fate.UNREPORTED}
    assert done.attempts == 1 and ran.read_text().split() == ["alpha"]
    assert [body["assignment_id"] for body in fake.posted("/result")] == [first.assignment_id]
    assert first.status == "FINISHED" and second.results == []


def test_max_jobs_bounds_what_is_leased_and_run(fake: FakeMainframe) -> None:
    scans = [fake.submit(name) for name in ("alpha", "beta", "gamma")]
    assert work(fake, python("pass"), batch=5, max_jobs=2).attempts == 2
    assert [scan.status for scan in scans] == ["FINISHED", "FINISHED", "QUEUED"]


def test_an_idle_worker_polls_again_after_the_interval(fake: FakeMainframe) -> None:
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        fake.submit("requests")  # work arrives while the worker waits

    assert work(fake, python("pass"), idle_exit=False, max_jobs=1, sleep=sleep).attempts == 1
    assert sleeps == [2.0]
    assert len(fake.posted("/jobs")) == 2


def test_a_server_error_on_lease_is_waited_out(fake: FakeMainframe) -> None:
    fake.submit("requests")
    answers = iter([httpx.Response(503, json={"error": "unavailable"})])

    def handle(request: httpx.Request) -> httpx.Response:
        return next(answers, None) or fake.handle(request)

    processed, sleeps = work_through(handle)
    assert processed.attempts == 1 and len(sleeps) == 1 and 1.0 <= sleeps[0] <= 2.0


def test_an_outage_is_waited_out_with_growing_jittered_pauses(fake: FakeMainframe) -> None:
    fake.submit("requests")
    down = {"polls": 6}

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/jobs") and down["polls"]:
            down["polls"] -= 1
            return httpx.Response(503, json={"error": "database_unavailable", "detail": "down"})
        return fake.handle(request)

    def run(seed: int) -> list[float]:
        down["polls"] = 6
        fake.submit(f"pkg{seed}")
        return work_through(handle, rng=random.Random(seed))[1]

    fleet = [run(seed) for seed in range(4)]
    for sleeps in fleet:
        assert len(sleeps) == 6
        for n, slept in enumerate(sleeps):  # half of min(60, 2 * 2**n) fixed, half jitter
            assert min(60.0, 2.0 * 2**n) / 2 <= slept <= min(60.0, 2.0 * 2**n)
    assert len({sleeps[0] for sleeps in fleet}) == 4  # not in lockstep


def test_a_finished_result_is_reported_once_the_server_is_back(fake: FakeMainframe) -> None:
    scan = fake.submit("requests")
    outage = {"left": 12}  # long past the old three tries

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/result") and outage["left"]:
            outage["left"] -= 1
            if outage["left"] % 2:
                raise httpx.ConnectError("refused", request=request)
            return httpx.Response(503, json={"error": "database_unavailable", "detail": "down"})
        return fake.handle(request)

    processed, sleeps = work_through(handle, rng=random.Random(3))
    assert processed.attempts == 1 and scan.status == "FINISHED"
    assert len(fake.posted("/result")) == 1  # the command ran once and its result landed once
    assert len(sleeps) == 12 and sleeps[-1] > sleeps[0]


def test_a_bad_token_stops_the_worker(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with fake.client(token="revoked") as client, pytest.raises(MainframeError) as raised:
        run_worker(BASE_URL, "revoked", python("pass"), client=client)
    assert raised.value.status == 401


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_stop_signal_finishes_the_current_scan_then_stops(
    fake: FakeMainframe, signum: signal.Signals
) -> None:
    first, second = fake.submit("alpha"), fake.submit("beta")
    previous = signal.getsignal(signum)
    code = f"import os, time; os.kill(os.getppid(), {int(signum)}); time.sleep(0.1)"
    assert work(fake, python(code), idle_exit=False).attempts == 1
    assert first.status == "FINISHED"
    assert second.status == "QUEUED"
    assert len(fake.posted("/jobs")) == 1
    assert signal.getsignal(signum) is previous


@pytest.mark.parametrize(
    ("fetch", "first_pause"),
    [(True, (0.25, 0.5)), (False, (0.5, 1.0))],
    ids=["sdk-retries-a-completion", "runner-retries-a-plain-report"],
)
def test_a_result_lost_in_transit_is_sent_again(
    fake: FakeMainframe, fetch: bool, first_pause: tuple[float, float]
) -> None:
    scan = fake.submit("requests")
    dropped: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/result") and not dropped:
            dropped.append(request.url.path)
            raise httpx.ReadTimeout("no answer", request=request)
        return fake.handle(request)

    processed, sleeps = work_through(handle, fetch=fetch)
    assert processed.attempts == 1 and len(sleeps) == 1
    assert first_pause[0] <= sleeps[0] <= first_pause[1]
    assert scan.status == "FINISHED"


def test_a_missing_command_fails_before_leasing(fake: FakeMainframe) -> None:
    fake.submit("requests")
    with pytest.raises(FileNotFoundError):
        work(fake, ["/nonexistent/scanner"])
    assert fake.requests == []


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "summary", "artifact"),
    [
        (0, b"", b"", None, None),
        (0, b"log\n/tmp/report.json\n\n  \n", b"", None, "/tmp/report.json"),
        (0, b"x" * 5000 + b"\n", b"", None, "x" * 1024),
        (
            2,
            b"",
            b"e" * 3000 + b"the end",
            "exit code 2\n" + ("e" * 3000 + "the end")[-2048:],
            None,
        ),
        (-9, b"", b"", "killed by signal SIGKILL", None),
        (1, b"", b"\xff\xfebad bytes", "exit code 1\n\ufffd\ufffdbad bytes", None),
    ],
    ids=["silent", "last-line", "long-line", "stderr-tail", "signal", "undecodable"],
)
def test_report_for_exit_keeps_the_tails_a_reader_needs(
    returncode: int, stdout: bytes, stderr: bytes, summary: str | None, artifact: str | None
) -> None:
    report = report_for_exit(returncode, stdout, stderr)
    assert (report.summary, report.artifact) == (summary, artifact)


# Complete-and-fetch: the reply to a result brings the next scans, so a worker polls only when
# it holds nothing.


def calls(fake: FakeMainframe) -> list[str]:
    """The requests the fake saw, heartbeats aside: poll, result or results."""
    kinds = {"jobs": "poll", "result": "result", "results": "results"}
    return [kinds[path.rsplit("/", 1)[1]] for path, _ in fake.requests if "heartbeat" not in path]


def test_at_batch_1_each_scan_takes_one_request(fake: FakeMainframe) -> None:
    scans = [fake.submit(name) for name in ("alpha", "beta", "gamma")]
    assert work(fake, python("pass")).attempts == 3
    # One poll to start and one to find the queue empty after a reply without jobs.
    assert calls(fake) == ["poll", "result", "result", "result", "poll"]
    assert [(scan.status, scan.attempt) for scan in scans] == [("FINISHED", 1)] * 3


def test_without_fetch_a_worker_polls_before_each_scan(fake: FakeMainframe) -> None:
    scans = [fake.submit(name) for name in ("alpha", "beta", "gamma")]
    assert work(fake, python("pass"), fetch=False).attempts == 3
    assert calls(fake) == ["poll", "result", "poll", "result", "poll", "result", "poll"]
    assert [scan.status for scan in scans] == ["FINISHED"] * 3


def test_a_batch_worker_takes_its_next_batch_with_its_results(fake: FakeMainframe) -> None:
    scans = [fake.submit(name) for name in ("alpha", "beta", "gamma", "delta", "epsilon")]
    assert work(fake, python("pass"), batch=2).attempts == 5
    assert calls(fake) == ["poll", "results", "results", "result", "poll"]
    assert [len(body["results"]) for body in fake.posted("/results")] == [2, 2]
    assert [scan.status for scan in scans] == ["FINISHED"] * 5


def test_max_jobs_fetches_no_more_than_it_will_run(fake: FakeMainframe) -> None:
    scans = [fake.submit(name) for name in ("alpha", "beta", "gamma")]
    assert work(fake, python("pass"), max_jobs=2).attempts == 2
    assert calls(fake) == ["poll", "result", "result"]
    assert [scan.status for scan in scans] == ["FINISHED", "FINISHED", "QUEUED"]


def test_a_lost_answer_costs_no_scan_and_no_second_lease(fake: FakeMainframe) -> None:
    first, second = fake.submit("alpha"), fake.submit("beta")
    lost: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        response = fake.handle(request)  # the server takes the result and leases beta...
        if request.url.path.endswith("/result") and not lost:
            lost.append(request.url.path)
            raise httpx.ReadTimeout("the answer was lost", request=request)  # ...unheard
        return response

    with capture_logs() as logs:
        processed, sleeps = work_through(handle)
    assert processed.attempts == 2 and len(sleeps) == 1
    assert calls(fake) == ["poll", "result", "result", "result", "poll"]
    assert [(scan.status, scan.attempt, len(scan.results)) for scan in (first, second)] == [
        ("FINISHED", 1, 1),
        ("FINISHED", 1, 1),
    ]
    assert [entry for entry in logs if entry["event"] == "job_rejected"] == []


def test_a_refused_result_makes_the_worker_poll(fake: FakeMainframe) -> None:
    first, second = fake.submit("alpha"), fake.submit("beta")

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(f"/{first.scan_id}/result"):
            fake.reassign(first.scan_id)  # alpha's lease went to another worker meanwhile
        return fake.handle(request)

    with capture_logs() as logs:
        processed, _ = work_through(handle)
    assert processed.attempts == 2  # answered: one refused, one accepted
    assert processed.words() == "2 scans in 2 attempts: 1 finished, 1 result refused"
    assert calls(fake) == ["poll", "result", "poll", "result", "poll"]
    assert (first.status, second.status, second.attempt) == ("PENDING", "FINISHED", 1)
    rejected = [entry for entry in logs if entry["event"] == "job_rejected"]
    assert [(entry["scan_id"], entry["error"]) for entry in rejected] == [
        (first.scan_id, "stale_assignment")
    ]


@pytest.mark.slow  # seconds of real waiting: in make test, not make check
def test_a_fetched_scan_is_heartbeated_while_it_runs() -> None:
    fake = FakeMainframe(lease_seconds=LEASE_S)
    first, second = fake.submit("alpha"), fake.submit("beta")
    # beta runs past its lease: only heartbeats keep it, and beta came in alpha's reply.
    code = "import os, time; time.sleep(2.0 if os.environ['MAINFRAME_SCAN_NAME'] == 'beta' else 0)"
    assert work(fake, python(code)).attempts == 2
    assert calls(fake) == ["poll", "result", "result", "poll"]
    beta = {"attempt": 1, "assignment_id": second.assignment_id}
    assert len([body for body in fake.posted("/heartbeat") if body == beta]) >= 3
    assert not second.lapsed and (first.status, second.status) == ("FINISHED", "FINISHED")


def test_a_scan_fetched_as_a_stop_comes_is_left_unrun(fake: FakeMainframe) -> None:
    first, second = fake.submit("alpha"), fake.submit("beta")

    def handle(request: httpx.Request) -> httpx.Response:
        response = fake.handle(request)
        if request.url.path.endswith("/result"):
            os.kill(os.getpid(), signal.SIGTERM)  # arrives once beta is leased in the reply
        return response

    with capture_logs() as logs:
        processed, _ = work_through(handle, idle_exit=False)
    assert processed.attempts == 1 and calls(fake) == ["poll", "result"]
    assert processed.fates == {first.scan_id: Fate.FINISHED, second.scan_id: Fate.UNREPORTED}
    assert (first.status, second.status, second.results) == ("FINISHED", "PENDING", [])
    abandoned = [entry["scan_id"] for entry in logs if entry["event"] == "job_abandoned"]
    assert abandoned == [second.scan_id]  # its lease lapses and the server hands it on


def test_idle_exit_waits_for_a_retry_it_scheduled(fake: FakeMainframe, tmp_path: Path) -> None:
    fake.retry_seconds = 0.3
    scan = fake.submit("flaky")
    marker = tmp_path / "failed-once"
    # Fails the first time, finishes the second.
    code = (
        f"import os, sys; p = {str(marker)!r}; done = os.path.exists(p); "
        "open(p, 'w'); sys.exit(0 if done else 1)"
    )
    started = time.monotonic()
    with capture_logs() as logs:
        done = work(fake, python(code), poll_interval=0.1, idle_wait=30)
    assert done.words() == "1 scan in 2 attempts: 1 finished"
    assert scan.status == "FINISHED" and 0.3 <= time.monotonic() - started < 30
    assert "idle_waiting_for_retries" in [entry["event"] for entry in logs]


def test_idle_exit_does_not_wait_past_its_bound(fake: FakeMainframe) -> None:
    fake.retry_seconds = 1000
    scan = fake.submit("flaky")
    slept: list[float] = []
    with capture_logs() as logs:
        done = work(fake, python("raise SystemExit(1)"), idle_wait=600, sleep=slept.append)
    assert done.words() == "1 scan in 1 attempt: 1 waiting for a retry"
    assert scan.status == "QUEUED" and slept == []
    [line] = [entry for entry in logs if entry["event"] == "idle_exit_before_retry"]
    assert line["scans"] == 1 and line["due_in"] > 600 and line["idle_wait"] == 600


def test_a_retry_that_never_comes_is_waited_for_a_bounded_time() -> None:
    fake = FakeMainframe(retry_seconds=50)
    fake.submit("flaky")
    now = [time.time()]

    def sleep(seconds: float) -> None:
        now[0] += seconds  # the worker's clock moves; the fake's retry stays 50 s away

    processed = work(
        fake, python("raise SystemExit(1)"), idle_wait=60, poll_interval=2.0, sleep=sleep,
        now=lambda: now[0],
    )  # fmt: skip
    # Fifty seconds of polls every 2 s, then the retry (due by the worker's clock) is not
    # leased, so the grace runs out and the worker stops: bounded in polls, not in sleeping.
    assert processed.attempts == 1 and len(fake.posted("/jobs")) <= 40


def test_a_result_that_dead_letters_its_scan_says_so() -> None:
    fake = FakeMainframe(max_attempts=1)
    fake.submit("doomed")
    with capture_logs() as logs:
        assert work(fake, python("raise SystemExit(1)")).words() == (
            "1 scan in 1 attempt: 1 dead letter"
        )
    [line] = [entry for entry in logs if entry["event"] == "scan_dead_lettered"]
    assert line["log_level"] == "warning" and line["reason"] == "attempts_exhausted"
    assert line["name"] == "doomed" and line["attempt_count"] == 1


def test_a_server_that_stays_down_is_given_up_after_the_bound() -> None:
    now = [1_000.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    def handle(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    transport = httpx.MockTransport(handle)
    with (
        Client(BASE_URL, TOKEN, transport=transport, sleep=sleep) as client,
        pytest.raises(ServerUnreachable) as raised,
    ):
        run_worker(
            BASE_URL, TOKEN, python("pass"), client=client, sleep=sleep, now=lambda: now[0],
            idle_exit=True, give_up_after=120,
        )  # fmt: skip
    assert raised.value.seconds == 120 and "connection refused" in raised.value.error
    assert 120 <= sum(slept) < 300 and len(slept) < 40


def test_a_scan_retried_on_the_same_worker_is_one_scan_of_several_attempts() -> None:
    fake = FakeMainframe(max_attempts=3)  # retries due at once
    doomed = [fake.submit(f"doomed-{n}") for n in range(3)]
    with capture_logs() as logs:
        done = work(fake, python("raise SystemExit(1)"))
    assert [(scan.status, scan.attempt) for scan in doomed] == [("FAILED", 3)] * 3
    assert done.words() == "3 scans in 9 attempts: 3 dead letters"
    [stopped] = [entry for entry in logs if entry["event"] == "worker_stopped"]
    assert (stopped["scans"], stopped["attempts"], stopped["dead_lettered"]) == (3, 9, 3)
    assert stopped["finished"] == stopped["retrying"] == stopped["unreported"] == 0


def test_max_jobs_counts_attempts_not_scans() -> None:
    fake = FakeMainframe(max_attempts=3)
    first, second = fake.submit("flaky"), fake.submit("later")
    done = work(fake, python("raise SystemExit(1)"), max_jobs=2)
    # The first scan's retry is due at once and older than the second: two attempts of one.
    assert done.words() == "1 scan in 2 attempts: 1 waiting for a retry"
    assert (first.attempt, second.attempt) == (2, 0)

"""The link to PostgreSQL hangs under load (docs/reliability.md): a relay between the server
and the database stops passing bytes without closing anything, as a stuck pooler or a
partitioned path does, so neither TCP keepalives nor `statement_timeout` ever fire. Every
request answers within the database deadline (`MAINFRAME_DATABASE_DEADLINE_SECONDS`): 503
`database_unavailable` with `Retry-After`, never a hang past a worker's timeout and never a
500; `/readyz` says not ready while `/healthz` stays 200; once the link relays again the same
server serves without a restart, and every result it accepted is there."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.faults.hosts import Forwarder
from tests.faults.load import provision
from tests.polling import wait_for
from tests.serverproc import ServerProcess

DEADLINE_SECONDS = 2.0
SLACK_SECONDS = 1.5  # an answer's way back, and a loaded machine
HUNG_SECONDS = 6.0  # longer than the deadline, shorter than a worker's timeout
WORKER_TIMEOUT_SECONDS = 20.0  # what dragonfly's workers wait for an answer
RECOVERY_BOUND_SECONDS = 5.0  # from the link relaying again to the first 2xx
LOAD_GOING = 20  # scans finished before the link hangs: the load is under way


@dataclass
class Seen:
    """Each answer: when its request started, how long it took, and its status."""

    answers: list[tuple[float, float, int]] = field(default_factory=list)
    bad_503s: list[str] = field(default_factory=list)
    timeouts: int = 0
    finished: set[int] = field(default_factory=set)
    submitted: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def post(self, http: httpx.Client, path: str, **kwargs: object) -> httpx.Response | None:
        start = time.monotonic()
        try:
            response = http.post(path, **kwargs)  # type: ignore[arg-type]
        except httpx.TimeoutException:
            with self.lock:
                self.timeouts += 1
            return None
        with self.lock:
            self.answers.append((start, time.monotonic() - start, response.status_code))
            if response.status_code == 503 and (
                "retry-after" not in response.headers
                or response.json().get("error") != "database_unavailable"
            ):
                self.bad_503s.append(f"{response.headers} {response.text}")
        return response

    def ok_since(self, moment: float) -> bool:
        with self.lock:
            return any(start >= moment and status < 300 for start, _, status in self.answers)


def _worker(url: str, token: str, seen: Seen, stop: threading.Event) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=WORKER_TIMEOUT_SECONDS) as http:
        while not stop.is_set():
            polled = seen.post(http, "/api/v1/jobs?batch=1")
            if polled is None or polled.status_code != 200 or not polled.json():
                time.sleep(0.05)
                continue
            [job] = polled.json()
            echo = {"attempt": job["attempt"], "assignment_id": job["assignment_id"]}
            body = {"outcome": "finished", **echo}
            done = seen.post(http, f"/api/v1/jobs/{job['scan_id']}/result", json=body)
            if done is not None and done.status_code == 200:
                with seen.lock:
                    seen.finished.add(job["scan_id"])


def _source(url: str, token: str, seen: Seen, stop: threading.Event, label: int) -> None:
    """A feed sending single submissions; those that meet at the server go in one statement
    (store/work/coalesce.py), and one waiting behind a hung statement fails with it."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=WORKER_TIMEOUT_SECONDS) as http:
        for n in range(100_000):
            if stop.is_set():
                return
            body = {"name": f"fed{label}-{n}", "version": "1"}
            done = seen.post(http, "/api/v1/scans", json=body)
            if done is not None and done.status_code == 201:
                with seen.lock:
                    seen.submitted.add(done.json()["scan_id"])
            else:
                time.sleep(0.05)


def _timed_get(url: str) -> tuple[int, float]:
    start = time.monotonic()
    status = httpx.get(url, timeout=WORKER_TIMEOUT_SECONDS, trust_env=False).status_code
    return status, time.monotonic() - start


@pytest.mark.slow
def test_a_hung_link_answers_503_within_the_deadline_and_recovers(
    pg_url: str, tmp_path: Path
) -> None:
    worker, source = provision(pg_url)
    seen, stop = Seen(), threading.Event()
    env = {"MAINFRAME_DATABASE_DEADLINE_SECONDS": str(DEADLINE_SECONDS)}
    with Forwarder("127.0.0.1", ("127.0.0.1", 5432)) as relay:
        through = pg_url.replace("127.0.0.1:5432", f"127.0.0.1:{relay.port}")
        assert through != pg_url
        server = ServerProcess(through, tmp_path, MAINFRAME_SWEEP_SECONDS="0.5", **env)
        with server:
            headers = {"Authorization": f"Bearer {source}"}
            items = [{"name": f"p{n}", "version": "1"} for n in range(400)]
            submitted = httpx.post(
                server.url + "/api/v1/scans/batch",
                json={"scans": items},
                headers=headers,
                timeout=30,
            )
            assert submitted.status_code == 200
            threads = [
                threading.Thread(target=_worker, args=(server.url, worker, seen, stop))
                for _ in range(4)
            ] + [
                threading.Thread(target=_source, args=(server.url, source, seen, stop, n))
                for n in range(3)
            ]
            for thread in threads:
                thread.start()
            try:
                wait_for(lambda: len(seen.finished) >= LOAD_GOING, timeout=30, what="the load")
                relay.swallow()
                hung = time.monotonic()
                time.sleep(DEADLINE_SECONDS + SLACK_SECONDS)
                ready = _timed_get(server.url + "/readyz")
                alive = _timed_get(server.url + "/healthz")
                time.sleep(max(0.0, hung + HUNG_SECONDS - time.monotonic()))
            finally:
                relay.heal()
            healed = time.monotonic()
            wait_for(lambda: seen.ok_since(healed), timeout=RECOVERY_BOUND_SECONDS, what="a 2xx")
            recovered = time.monotonic() - healed
            stop.set()
            for thread in threads:
                thread.join(timeout=WORKER_TIMEOUT_SECONDS + 5)
            after = _timed_get(server.url + "/readyz")
            events = [event["event"] for event in server.log_events()]

    during = [(d, s) for start, d, s in seen.answers if hung <= start and start + d <= healed]
    in_flight = [(d, s) for start, d, s in seen.answers if start < hung < start + d]
    assert seen.timeouts == 0, "a request hung past a worker's timeout"
    assert during, "requests were answered while the link hung"
    assert {s for _, s in during} == {503}, during
    assert max(d for d, _ in during + in_flight) <= DEADLINE_SECONDS + SLACK_SECONDS
    assert seen.bad_503s == []
    assert not [s for _, _, s in seen.answers if s >= 500 and s != 503]
    assert ready[0] == 503 and ready[1] <= DEADLINE_SECONDS + SLACK_SECONDS, ready
    assert alive[0] == 200 and alive[1] <= SLACK_SECONDS, alive
    assert after[0] == 200
    assert recovered <= RECOVERY_BOUND_SECONDS
    assert "unhandled_error" not in events

    engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        status = dict(conn.execute(text("SELECT id, status FROM scans")).all())
    engine.dispose()
    lost = [scan for scan in seen.finished if status.get(scan) != "FINISHED"]
    assert lost == [], f"results answered 200 but not durable: {lost[:10]}"
    assert seen.submitted and seen.submitted <= set(status), "every 201 submission is stored"
    print(
        f"link hung {HUNG_SECONDS:.0f} s: {len(during)} answers during it, slowest "
        f"{max(d for d, _ in during + in_flight):.2f} s (deadline {DEADLINE_SECONDS:g} s), "
        f"readyz {ready[0]} in {ready[1]:.2f} s, served again {recovered:.2f} s after the heal, "
        f"{len(seen.finished)} results and {len(seen.submitted)} submissions accepted, 0 lost"
    )

"""Several hosts on one PostgreSQL database: a host whose link goes down mid-run, and hosts
whose clocks disagree.

The first test builds three hosts (network namespaces on a bridge), each serving Mainframe
and reaching PostgreSQL over the bridge; workers in the root namespace spread over them, and
midway one host's link goes down. Its leases must lapse and be retaken through the others,
and nothing acknowledged may be lost or done twice. The second runs three servers whose
clocks are 10 minutes apart and checks that leases, lapses and stamps follow the database's
clock, not the host's."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, make_url, text

from tests.conftest import _pg_url, drop_pg_database, fresh_pg_database
from tests.faults.hosts import (
    Forwarder,
    Network,
    NetworkUnavailable,
    clock_skew_works,
    missing,
    skewed_clock,
)
from tests.faults.load import Fleet, fill, worker_loop
from tests.serverproc import ServerProcess, cli

SCANS = 300
WORKERS = 6  # two per host at the start
PORT = 8080  # every host has its own port space
SCAN_SECONDS = 0.02
REQUEST_TIMEOUT_S = 5.0  # a worker gives up on a host that stays silent this long
CUT_BOUND_S = 30.0  # from the first scan to the moment the link goes down
SETTLE_BOUND_S = 60.0  # from the cut until every scan is FINISHED
REJOIN_BOUND_S = 15.0  # from the link coming back to the host answering /readyz 200
HOST_ENV = {
    "MAINFRAME_JOB_TIMEOUT": "2",
    "MAINFRAME_MAX_JOB_ATTEMPTS": "10",
    "MAINFRAME_SWEEP_SECONDS": "0.5",
    "MAINFRAME_RETRY_BASE_SECONDS": "0",
    "MAINFRAME_POOL_SIZE": "4",  # three servers and the test within max_connections = 100
}


def _engine(url: str) -> Engine:
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    """An empty PostgreSQL database brought to head by `mainframe db upgrade`, as an operator
    would (`pg_template` makes it skip or fail the usual way when PostgreSQL is absent)."""
    del pg_template
    name = fresh_pg_database(None)
    url = _pg_url(name)
    try:
        cli(url, "db", "upgrade")
        yield url
    finally:
        drop_pg_database(name)


@pytest.fixture
def network() -> Iterator[Network]:
    """Three hosts on a bridge, removed again however the test ends."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        missing("building network namespaces needs root and iproute2")
    net = Network(3)
    try:
        net.open()
    except NetworkUnavailable as exc:
        net.close()
        missing(f"this machine refuses a bridge: {exc}")
    try:
        yield net
    finally:
        net.close()
    assert net.leftovers() == [], "the test left namespaces or links behind"


def _over_the_bridge(url: str, forwarder: Forwarder) -> str:
    """The same database, reached through the forwarder's address on the bridge."""
    moved = make_url(url).set(host=forwarder.listen_host, port=forwarder.port)
    return moved.render_as_string(hide_password=False)


def _upstream(url: str) -> tuple[str, int]:
    parsed = make_url(url)
    return parsed.host or "127.0.0.1", parsed.port or 5432


def _print_tails(servers: list[ServerProcess]) -> None:
    for server in servers:
        print(f"--- {server.url} stderr (last lines) ---\n{server.tail()}")


def _stop_all(servers: list[ServerProcess]) -> None:
    for server in servers:
        server.stop()  # by its own PID: terminate, then kill after 10 s


def _live_scans(engine: Engine) -> int:
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT count(*) FROM scans WHERE status NOT IN ('FINISHED', 'FAILED')")
        ).scalar()
    return int(found or 0)


def _wait(condition: Callable[[], object], bound_s: float, step_s: float = 0.1) -> bool:
    """Whether `condition` came true within `bound_s` seconds, checked every `step_s`."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step_s)
    return bool(condition())


def _readyz(url: str) -> int:
    try:
        return httpx.get(url + "/readyz", timeout=2.0, trust_env=False).status_code
    except httpx.TransportError:
        return -1


class Phases:
    """Wall-clock time of each phase of a run, for the report."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.took: dict[str, float] = {}

    def done(self, phase: str) -> None:
        now = time.monotonic()
        self.took[phase] = now - self.last
        self.last = now

    def __str__(self) -> str:
        return ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in self.took.items())


def _start_together(starts: list[Callable[[], ServerProcess]]) -> list[ServerProcess]:
    """Start servers side by side (each waits for its /healthz); if one fails, the others
    are stopped before the error is raised."""
    with ThreadPoolExecutor(len(starts)) as pool:
        futures = [pool.submit(start) for start in starts]
        wait(futures)
    started = [f.result() for f in futures if f.exception() is None]
    failed = [error for f in futures if (error := f.exception()) is not None]
    if failed:
        _stop_all(started)
        raise failed[0]
    return started


def _start_on_hosts(network: Network, url: str, tmp_path: Path) -> list[ServerProcess]:
    """One server per host, inside its namespace, bound to its address on the bridge."""
    return _start_together(
        [
            partial(
                ServerProcess,
                url,
                tmp_path,
                host=host.address,
                port=PORT,
                prefix=host.prefix,
                **HOST_ENV,
            )
            for host in network.hosts
        ]
    )


@dataclass
class LinkDownRun:
    """What the workers saw, and how the run went around the cut."""

    fleet: Fleet
    held_at_cut: int = 0  # leases the downed host's workers held when its link went down
    settled: bool = False  # every scan FINISHED within SETTLE_BOUND_S of the cut
    rejoined: bool = False  # the downed host answered /readyz 200 once its link was back


@pytest.mark.slow
def test_a_host_whose_link_goes_down_strands_no_scan(
    network: Network, pg_url: str, tmp_path: Path
) -> None:
    phases = Phases()
    owner = cli(pg_url, "owner", "create", "ops")
    engine = _engine(pg_url)
    with Forwarder(network.address, _upstream(pg_url)) as forwarder:
        servers = _start_on_hosts(network, _over_the_bridge(pg_url, forwarder), tmp_path)
        phases.done("servers up")
        try:
            tokens = _endpoint(servers[1], owner, "pypi", "w")
            fill(servers[1].url, tokens["feed"], SCANS)
            run = _load_and_cut(network, servers, engine, tokens["w"], phases)
            _check_link_down(engine, run, servers[0].url)
        except BaseException:
            _print_tails(servers)
            raise
        finally:
            _stop_all(servers)
            engine.dispose()
    fleet = run.fleet
    print(
        f"link down on {network.hosts[0].address} holding {run.held_at_cut} leases: "
        f"{SCANS} scans FINISHED, {sum(fleet.handed.values())} assignments, "
        f"{len(fleet.acknowledged)} acknowledged, 0 lost, 0 handed twice, "
        f"{fleet.transport_errors} transport errors; answers {dict(fleet.by_server)}; "
        f"forwarder {forwarder.accepted} connections; {phases}"
    )


def _load_and_cut(
    network: Network, servers: list[ServerProcess], engine: Engine, worker: str, phases: Phases
) -> LinkDownRun:
    """Workers spread over every host; once they are busy, the first host's link goes down.
    Wait until every scan is FINISHED, stop the workers, then bring the link back."""
    run, stop = LinkDownRun(Fleet([server.url for server in servers])), threading.Event()
    downed, fleet = network.hosts[0], run.fleet
    threads = [
        threading.Thread(
            target=worker_loop,
            args=(fleet, worker, stop, n),
            # A scan takes a moment, so a host's workers hold leases they have not reported
            # yet when its link goes down: those are the leases that must lapse.
            kwargs={"timeout": REQUEST_TIMEOUT_S, "scan_seconds": SCAN_SECONDS},
        )
        for n in range(WORKERS)
    ]
    for thread in threads:
        thread.start()
    try:
        # Cut while the doomed host's workers hold leases, so some are surely stranded.
        assert _wait(
            lambda: len(fleet.acknowledged) >= SCANS // 4 and fleet.holding[servers[0].url] > 0,
            CUT_BOUND_S,
            0.01,
        ), f"the load never reached the first host: {dict(fleet.by_server)}"
        network.link_down(downed)
        run.held_at_cut = fleet.holding[servers[0].url]
        phases.done("load until the cut")
        run.settled = _wait(lambda: _live_scans(engine) == 0, SETTLE_BOUND_S, 0.25)
        phases.done("cut to every scan FINISHED")
    finally:
        stop.set()
        for thread in threads:
            thread.join(REQUEST_TIMEOUT_S + 10)
        phases.done("workers stopped")
    network.link_up(downed)
    run.rejoined = _wait(lambda: _readyz(servers[0].url) == 200, REJOIN_BOUND_S, 0.2)
    phases.done("link up to /readyz 200")
    return run


def _check_link_down(engine: Engine, run: LinkDownRun, downed_url: str) -> None:
    """What the workers saw and what the database holds after a host's link went down."""
    fleet = run.fleet
    fives = {key: n for key, n in fleet.by_server.items() if key[1] >= 500}
    assert fives == {}, f"5xx answers by (host, status): {fives}"
    doubled = [key for key, count in fleet.handed.items() if count > 1]
    assert doubled == [], f"(scan, attempt) handed to two workers: {doubled[:5]}"
    assert fleet.acknowledged_twice == [], f"results accepted twice: {fleet.acknowledged_twice}"
    with engine.connect() as conn:
        found = conn.execute(text("SELECT id, status FROM scans")).all()
        rows = conn.execute(text("SELECT scan_id, attempt, outcome FROM attempts")).all()
    statuses: dict[int, str] = {scan: status for scan, status in found}
    outcome = {(scan, attempt): out for scan, attempt, out in rows}
    finished = Counter(scan for scan, _, out in rows if out == "finished")
    assert run.settled, (
        f"scans still live {SETTLE_BOUND_S} s after the cut: {Counter(statuses.values())}"
    )
    assert len(statuses) == SCANS
    assert set(statuses.values()) == {"FINISHED"}, Counter(statuses.values())
    twice = [scan for scan, n in finished.items() if n > 1]
    assert twice == [], f"scans with two finished attempts: {twice[:5]}"
    assert set(finished) == set(statuses), "a FINISHED scan without its finished attempt"
    lost = [
        (scan, attempt)
        for scan, attempt in fleet.acknowledged.items()
        if statuses[scan] != "FINISHED" or outcome.get((scan, attempt)) != "finished"
    ]
    assert lost == [], f"results answered 200 but not durable: {lost[:5]}"
    stranded = [
        lease
        for lease, url in fleet.through.items()
        if url == downed_url and fleet.acknowledged.get(lease[0]) != lease[1]
    ]
    assert stranded, "the downed host held no lease when its link went down"
    unresolved = [
        lease for lease in stranded if outcome.get(lease) not in {"lease_expired", "finished"}
    ]
    assert unresolved == [], f"stranded leases neither lapsed nor finished: {unresolved[:5]}"
    retaken = [lease for lease in stranded if outcome.get(lease) == "lease_expired"]
    assert retaken, f"no stranded lease lapsed and was retaken: {stranded}"
    assert set(fleet.dropped) == {downed_url}, f"transport errors by host: {dict(fleet.dropped)}"
    assert run.rejoined, f"{downed_url} did not serve again within {REJOIN_BOUND_S} s of its link"


# --- Test B: three servers on one database, their clocks 10 minutes apart ---------------

SKEW_S = 600
CLOCK_JOB_TIMEOUT_S = 4
CLOCK_JOB_TIMEOUT_US = CLOCK_JOB_TIMEOUT_S * 1_000_000
STAMP_TOLERANCE_US = 1_000_000  # a stamp within 1 s of the database's clock is its clock
# A lapsed lease is retaken within this of its end: a poll looks for lapses of leases other
# processes granted once a second, the sweepers run every 0.5 s, the test polls every 0.2 s,
# and a round of its polls takes a while on a busy machine.
LATE_BOUND_S = 3.0
POLL_EVERY_S = 0.2
CLOCK_ENV = {
    "MAINFRAME_JOB_TIMEOUT": str(CLOCK_JOB_TIMEOUT_S),
    "MAINFRAME_MAX_JOB_ATTEMPTS": "10",
    "MAINFRAME_SWEEP_SECONDS": "0.5",
    "MAINFRAME_RETRY_BASE_SECONDS": "0",
    "MAINFRAME_POOL_SIZE": "4",
}
CLOCKS = {"normal": 0, "fast": SKEW_S, "slow": -SKEW_S}


class Database:
    """The test's own view of the database: its clock and the rows the servers wrote."""

    def __init__(self, url: str) -> None:
        self.engine = _engine(url)

    def now_us(self) -> int:
        with self.engine.connect() as conn:
            found = conn.execute(text("SELECT (extract(epoch FROM now()) * 1000000)::bigint"))
            return int(found.scalar_one())

    def scan(self, scan_id: int) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(text("SELECT * FROM scans WHERE id = :id"), {"id": scan_id})
            return dict(row.mappings().one())

    def attempts(self, scan_id: int) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT * FROM attempts WHERE scan_id = :id ORDER BY seq"), {"id": scan_id}
            )
            return [dict(row) for row in rows.mappings()]


@dataclass
class SkewedHosts:
    """The three servers by clock, the database, and what the test found wrong, by check."""

    servers: dict[str, ServerProcess]
    db: Database
    owner: str
    findings: dict[str, list[str]] = field(
        default_factory=lambda: {"live lease": [], "lapse": [], "stamps": []}
    )

    def endpoint(self, name: str, *workers: str) -> dict[str, str]:
        return _endpoint(self.servers["normal"], self.owner, name, *workers)


def _endpoint(server: ServerProcess, owner: str, name: str, *workers: str) -> dict[str, str]:
    """Create an endpoint over the API, with a source `feed` and the given workers; return
    their tokens by name (one CLI process per credential costs seconds on a busy machine)."""
    created = _post(server, owner, "/api/v1/endpoints", {"name": name})
    assert created.status_code == 201, created.text
    tokens = {}
    for role, principal in [("source", "feed"), *(("worker", w) for w in workers)]:
        issued = _post(server, owner, f"/api/v1/endpoints/{name}/tokens", {role: principal})
        assert issued.status_code == 201, issued.text
        tokens[principal] = issued.json()["secret"]
    return tokens


def _post(server: ServerProcess, token: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.post(
        server.url + path,
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
        trust_env=False,
    )


def _submit(server: ServerProcess, feed: str, name: str) -> int:
    submitted = _post(server, feed, "/api/v1/scans", {"name": name, "version": "1"})
    assert submitted.status_code == 201, submitted.text
    return int(submitted.json()["scan_id"])


def _poll(server: ServerProcess, worker: str, batch: int = 1) -> list[dict[str, Any]]:
    polled = _post(server, worker, f"/api/v1/jobs?batch={batch}")
    assert polled.status_code == 200, polled.text
    jobs: list[dict[str, Any]] = polled.json()
    return jobs


def _finish(server: ServerProcess, worker: str, job: dict[str, Any]) -> httpx.Response:
    echo = {"attempt": job["attempt"], "assignment_id": job["assignment_id"]}
    return _post(
        server, worker, f"/api/v1/jobs/{job['scan_id']}/result", {"outcome": "finished", **echo}
    )


def _off_us(stamp: int | None, low: int, high: int) -> int | None:
    """How far `stamp` lies outside [low, high] (0 inside); None for a missing stamp."""
    if stamp is None:
        return None
    return stamp - low if stamp < low else stamp - high if stamp > high else 0


def _seconds(us: int) -> str:
    return f"{us / 1_000_000:+.1f} s"


@pytest.fixture
def skewed_hosts(pg_url: str, tmp_path: Path) -> Iterator[SkewedHosts]:
    """A normal server, one 10 minutes ahead and one 10 minutes behind, on one database."""
    why = clock_skew_works(SKEW_S)
    if why is not None:
        missing(why)
    owner = cli(pg_url, "owner", "create", "ops")
    servers = _start_together(
        [
            partial(ServerProcess, pg_url, tmp_path, **CLOCK_ENV, **skewed_clock(offset))
            for offset in CLOCKS.values()
        ]
    )
    hosts = SkewedHosts(dict(zip(CLOCKS, servers, strict=True)), Database(pg_url), owner)
    try:
        yield hosts
    finally:
        _stop_all(servers)
        hosts.db.engine.dispose()


@pytest.mark.slow
def test_hosts_with_skewed_clocks_follow_the_database_clock(skewed_hosts: SkewedHosts) -> None:
    hosts = skewed_hosts
    try:
        for name, server in hosts.servers.items():
            date = httpx.get(server.url + "/healthz", trust_env=False).headers["date"]
            skew = parsedate_to_datetime(date).timestamp() - time.time()
            assert abs(skew - CLOCKS[name]) < 5, f"the {name} server's clock is {skew:+.0f} s off"
        _check_stamps(hosts)
        _check_live_lease_is_kept(hosts)
        leases = _check_lapses_on_time(hosts)
        lags = sorted(lease.lag_s for lease in leases if lease.lag_s is not None)
        print("clock skew, servers at +0 s, +600 s and -600 s, against the database's clock:")
        print(f"  retaken leases, seconds after their end: {[round(lag, 1) for lag in lags]}")
        for check, found in hosts.findings.items():
            print(f"  {check}: {'ok' if not found else f'{len(found)} wrong'}")
            for line in found:
                print(f"    - {line}")
        for check, found in hosts.findings.items():
            assert found == [], f"{check}: " + "; ".join(found)
    except BaseException:
        _print_tails(list(hosts.servers.values()))
        raise


def _check_stamps(hosts: SkewedHosts) -> None:
    """Through each server in turn: submit, lease and finish one scan, then compare every
    stamp written with the database's clock read around each request."""
    tokens = hosts.endpoint("stamps", "w")
    found = hosts.findings["stamps"]
    for name, server in hosts.servers.items():
        t0 = hosts.db.now_us()
        scan_id = _submit(server, tokens["feed"], f"stamp-{name}")
        t1 = hosts.db.now_us()
        jobs = _poll(server, tokens["w"])
        t2 = hosts.db.now_us()
        if [job["scan_id"] for job in jobs] != [scan_id]:
            found.append(f"the {name} server did not lease the scan it had just taken: {jobs}")
            continue
        finished = _finish(server, tokens["w"], jobs[0])
        t3 = hosts.db.now_us()
        if finished.status_code != 200:
            found.append(f"the {name} server refused its own lease's result: {finished.text}")
        row = hosts.db.scan(scan_id)
        closed = [a["closed_at"] for a in hosts.db.attempts(scan_id) if a["outcome"] == "finished"]
        stamps = {
            "created_at": (row["created_at"], t0, t1),
            "leased_at": (row["leased_at"], t1, t2),
            "finished_at": (row["finished_at"], t2, t3),
            "attempt closed_at": (closed[0] if closed else None, t2, t3),
        }
        for stamp, (value, low, high) in stamps.items():
            off = _off_us(value, low - STAMP_TOLERANCE_US, high + STAMP_TOLERANCE_US)
            if off is None or off != 0:
                shown = "missing" if off is None else f"{_seconds(off)} off the database's clock"
                found.append(f"the {name} server's {stamp} is {shown}")
        lease = (row["lease_expires_at"] or 0) - (row["leased_at"] or 0)
        if row["lease_expires_at"] is not None and lease != CLOCK_JOB_TIMEOUT_US:
            found.append(
                f"the {name} server granted a {lease / 1e6:.3f} s lease, "
                f"not {CLOCK_JOB_TIMEOUT_S} s"
            )


def _check_live_lease_is_kept(hosts: SkewedHosts) -> None:
    """w1 leases a scan through the normal server; while the lease is live, w2 polls through
    the skewed servers (whose sweepers run too): nothing may be handed out, and w1's result,
    sent before the lease ends, is accepted with the scan's history untouched."""
    tokens = hosts.endpoint("live", "w1", "w2")
    found = hosts.findings["live lease"]
    normal = hosts.servers["normal"]
    scan_id = _submit(normal, tokens["feed"], "live")
    leased_from = hosts.db.now_us()
    jobs = _poll(normal, tokens["w1"])
    assert [job["scan_id"] for job in jobs] == [scan_id], jobs
    # Poll until 1.5 s before the lease ends by the database's clock, leaving time for the
    # result to arrive while the lease is certainly live (bounded in wall time too).
    until = leased_from + CLOCK_JOB_TIMEOUT_US - 1_500_000
    deadline = time.monotonic() + CLOCK_JOB_TIMEOUT_S
    while (now := hosts.db.now_us()) < until and time.monotonic() < deadline:
        for name in ("fast", "slow"):
            for job in _poll(hosts.servers[name], tokens["w2"]):
                found.append(
                    f"the {name} server handed scan {job['scan_id']} (attempt {job['attempt']}) "
                    f"to w2 {(now - leased_from) / 1e6:.1f} s into w1's "
                    f"{CLOCK_JOB_TIMEOUT_S} s lease"
                )
        time.sleep(POLL_EVERY_S)
    finished = _finish(normal, tokens["w1"], jobs[0])
    answered = (hosts.db.now_us() - leased_from) / 1e6
    if finished.status_code != 200:
        found.append(
            f"w1's result {answered:.1f} s into its {CLOCK_JOB_TIMEOUT_S} s lease was refused: "
            f"{finished.status_code} {finished.text}"
        )
    row = hosts.db.scan(scan_id)
    history = [(a["attempt"], a["outcome"]) for a in hosts.db.attempts(scan_id)]
    if (row["status"], history) != ("FINISHED", [(1, "finished")]):
        found.append(
            f"w1's live lease was reaped: the scan is {row['status']} at attempt "
            f"{row['attempt_count']}, its attempts {history}"
        )


@dataclass
class GrantedLease:
    """A lease a skewed server granted, alone on its endpoint, whose taker polls through the
    checking server; and the span of the database's clock in which the lease ends (the
    request that granted it took time)."""

    granter: str
    checker: str
    taker: str
    scan_id: int
    ends_from: int
    ends_by: int
    seen: bool = False  # retaken, or found reaped: judged once
    lag_s: float | None = None  # retaken at most this long after the lease's end


def _check_lapses_on_time(hosts: SkewedHosts) -> list[GrantedLease]:
    """The fast and the slow server each grant a lease that each of the three servers must
    retake through a poll once it ends by the database's clock, within a bound, and never
    before (neither by a poll nor by a sweeper). Return the leases, for the report."""
    leases = _grant_leases(hosts)
    late_after = max((lease.ends_by for lease in leases), default=0) + int(LATE_BOUND_S * 1e6)
    deadline = time.monotonic() + CLOCK_JOB_TIMEOUT_S + LATE_BOUND_S + 10
    while not all(lease.seen for lease in leases):
        if hosts.db.now_us() >= late_after or time.monotonic() >= deadline:
            break
        for lease in leases:
            if not lease.seen:
                _watch(hosts, lease)
        time.sleep(POLL_EVERY_S)
    for lease in leases:
        if not lease.seen:
            row = hosts.db.scan(lease.scan_id)
            now = hosts.db.now_us()
            hosts.findings["lapse"].append(
                f"{_lease_name(lease)} was not retaken through the {lease.checker} server "
                f"{LATE_BOUND_S} s after it ended: the scan is {row['status']} at attempt "
                f"{row['attempt_count']}, lease_expires_at "
                f"{_stamp_from(row['lease_expires_at'], now)} and available_at "
                f"{_stamp_from(row['available_at'], now)} from the database's now"
            )
    return leases


def _grant_leases(hosts: SkewedHosts) -> list[GrantedLease]:
    """For each checking server and each skewed granter, an endpoint with one scan, leased
    through the granter; all granted back to back, so each is young when watching starts."""
    waiting = []
    for checker in CLOCKS:
        for granter in ("fast", "slow"):
            tokens = hosts.endpoint(f"{granter}-then-{checker}", "holder", "taker")
            # Submitted through the granter, so that it is due by the granter's clock too.
            _submit(hosts.servers[granter], tokens["feed"], f"{granter}-granted")
            waiting.append((granter, checker, tokens))
    leases = []
    for granter, checker, tokens in waiting:
        before = hosts.db.now_us()
        jobs = _poll(hosts.servers[granter], tokens["holder"])
        after = hosts.db.now_us()
        if len(jobs) != 1:
            hosts.findings["lapse"].append(f"the {granter} server did not lease: {jobs}")
            continue
        ends = (before + CLOCK_JOB_TIMEOUT_US, after + CLOCK_JOB_TIMEOUT_US)
        leases.append(GrantedLease(granter, checker, tokens["taker"], jobs[0]["scan_id"], *ends))
    return leases


def _watch(hosts: SkewedHosts, lease: GrantedLease) -> None:
    """Poll through the checking server; a retake before the lease's end, or long after it,
    is a finding, and so is a reap before its end that the database shows."""
    found = hosts.findings["lapse"]
    before = hosts.db.now_us()
    jobs = _poll(hosts.servers[lease.checker], lease.taker)
    after = hosts.db.now_us()
    if jobs:
        lease.seen, lease.lag_s = True, (after - lease.ends_from) / 1e6
        if after < lease.ends_from:
            early = (lease.ends_from - after) / 1e6
            found.append(
                f"the {lease.checker} server retook {_lease_name(lease)} {early:.1f} s early"
            )
        elif before > lease.ends_by + LATE_BOUND_S * 1e6:
            late = (before - lease.ends_by) / 1e6
            found.append(
                f"the {lease.checker} server retook {_lease_name(lease)} {late:.1f} s late"
            )
        return
    row = hosts.db.scan(lease.scan_id)
    read_by = hosts.db.now_us()  # the row was read before this instant
    if read_by < lease.ends_from and (row["status"], row["attempt_count"]) != ("PENDING", 1):
        lease.seen = True  # a sweeper reaped it early; whether it is retaken later is moot
        early = (lease.ends_from - read_by) / 1e6
        found.append(
            f"{_lease_name(lease)} was reaped {early:.1f} s early (the scan is now "
            f"{row['status']}, available_at {_stamp_from(row['available_at'], read_by)})"
        )


def _lease_name(lease: GrantedLease) -> str:
    return f"the lease the {lease.granter} server granted (scan {lease.scan_id})"


def _stamp_from(stamp: int | None, now: int) -> str:
    return "unset" if stamp is None else _seconds(stamp - now)

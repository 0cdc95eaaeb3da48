"""Hooks end to end: real `mainframe serve` processes announce to a real HTTPS receiver on
loopback (a self-signed CA the servers trust through SSL_CERT_FILE). Every firing point of a
dead letter, scan.ready, and the silences, on SQLite and on PostgreSQL with two servers.
Signatures are checked only with the reference `standardwebhooks` verifier."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from standardwebhooks.webhooks import Webhook

from tests.hookreceiver import Answer, Received, Receiver, receiver
from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli

DEAD_FIELDS = {
    "scan_id", "package", "source", "kind", "queue", "endpoint", "created_at",
    "reason", "attempts_total", "final_attempt",
}  # fmt: skip
READY_FIELDS = {
    "scan_id", "package", "source", "kind", "queue", "endpoint", "created_at",
    "attempt_count", "available_at",
}  # fmt: skip


CONTROL = "control"  # the endpoint, hook and token of the control announcements
ENABLED = "MAINFRAME_NOTIFY_HOOKS_ENABLED"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Fleet:
    """One or two servers on one database, a receiver, and the credentials."""

    url: str
    env: dict[str, str]
    servers: list[ServerProcess]
    https: Receiver
    tokens: dict[str, str]
    secrets: dict[str, str]  # hook name -> signing secret

    def http(self, index: int = 0) -> httpx.Client:
        return httpx.Client(base_url=self.servers[index % len(self.servers)].url, timeout=10)

    def hook(self, name: str, *args: str, endpoint: str = "pypi") -> None:
        target = f"https://localhost:{self.https.port}/{name}"
        self.secrets[name] = cli(
            self.url, "hook", "create", "--endpoint", endpoint, target, *args, **self.env
        )

    def submit(self, http: httpx.Client, name: str = "left-pad", **body: Any) -> int:
        sent = {"name": name, "version": "1.3.0", "kind": "malware", **body}
        response = http.post("/api/v1/scans", headers=auth(self.tokens["source"]), json=sent)
        assert response.status_code == 201, response.text
        scan_id: int = response.json()["scan_id"]
        return scan_id

    def lease(self, http: httpx.Client) -> dict[str, Any]:
        [job] = http.post("/api/v1/jobs", headers=auth(self.tokens["worker"])).json()
        return job  # type: ignore[no-any-return]

    def lease_when_due(self, http: httpx.Client, timeout: float = 10.0) -> dict[str, Any]:
        [job] = wait_for(
            lambda: http.post("/api/v1/jobs", headers=auth(self.tokens["worker"])).json(),
            timeout=timeout,
            what="a scan became due",
        )
        return job  # type: ignore[no-any-return]

    def fail(self, http: httpx.Client, job: dict[str, Any], summary: str = "boom") -> None:
        body = {
            "outcome": "failed",
            "retryable": True,
            "summary": summary,
            "artifact": "s3://logs/1",
            "attempt": job["attempt"],
            "assignment_id": job["assignment_id"],
        }
        response = http.post(
            f"/api/v1/jobs/{job['scan_id']}/result", headers=auth(self.tokens["worker"]), json=body
        )
        assert response.status_code == 200, response.text

    def received(self, count: int) -> list[tuple[str, dict[str, Any]]]:
        """Exactly `count` notifications, each verified; none more by the time a control
        announced through every server has arrived."""
        # Controls are only sent, and waited for, by control(): their number is settled here.
        controls = len(self.https.received) - len(self.announced())
        self.https.wait_for(count + controls)
        self.control()
        got = self.announced()
        assert len(got) == count, [r.body for r in got]
        return [self.verified(r) for r in got]

    def announced(self) -> list[Received]:
        """What the receiver heard, less the controls."""
        return [r for r in self.https.received if r.path != f"/{CONTROL}"]

    def control(self, servers: Sequence[int] | None = None) -> None:
        """A scan.ready announced through each server (all by default), on an endpoint of its
        own, waited for: whatever those servers had queued before has been dispatched."""
        if CONTROL not in self.secrets:
            self.hook(CONTROL, endpoint=CONTROL)
        indexes = range(len(self.servers)) if servers is None else servers
        before = len([r for r in self.https.received if r.path == f"/{CONTROL}"])
        for index in indexes:
            with self.http(index) as http:
                sent = {"name": f"control-{before}-{index}", "version": "1"}
                response = http.post("/api/v1/scans", headers=auth(self.tokens[CONTROL]), json=sent)
                assert response.status_code == 201, response.text
        wait_for(
            lambda: (
                len([r for r in self.https.received if r.path == f"/{CONTROL}"])
                >= before + len(indexes)
            ),
            timeout=20,
            what="the control announcements arrived",
        )

    def verified(self, request: Received) -> tuple[str, dict[str, Any]]:
        name = request.path.strip("/")
        payload: dict[str, Any] = Webhook(self.secrets[name]).verify(request.body, request.headers)
        return name, payload

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def provision(url: str, env: dict[str, str]) -> dict[str, str]:
    cli(url, "db", "upgrade", **env)  # as an operator would, before any other command
    owner = cli(url, "owner", "create", "ops", **env)
    cli(url, "endpoint", "create", "pypi", "--owner", "ops", "--open-intake", **env)
    cli(url, "endpoint", "create", "npm", "--owner", "ops", **env)
    cli(url, "endpoint", "create", CONTROL, "--owner", "ops", **env)
    return {
        "owner": owner,
        "worker": cli(url, "token", "create", "--endpoint", "pypi", "--worker", "w1", **env),
        "source": cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed", **env),
        "npm_source": cli(url, "token", "create", "--endpoint", "npm", "--source", "f2", **env),
        CONTROL: cli(url, "token", "create", "--endpoint", CONTROL, "--source", "c", **env),
    }


@pytest.fixture
def https() -> Iterator[Receiver]:
    with receiver("localhost", "127.0.0.1") as running:
        yield running


def start_fleet(database_url: str, tmp_path: Path, https: Receiver, **extra: str) -> Fleet:
    env = {
        "SSL_CERT_FILE": str(https.write_ca(tmp_path / "ca.pem")),
        "MAINFRAME_HOOKS_ALLOW_CIDRS": "127.0.0.0/8,::1/128",
        "MAINFRAME_HOOKS_BACKOFF_SECONDS": "0.05,0.05",
        "MAINFRAME_SECRET_KEY": Fernet.generate_key().decode(),
        "MAINFRAME_RETRY_BASE_SECONDS": "0",
        "MAINFRAME_MAX_JOB_ATTEMPTS": "2",
        "MAINFRAME_SWEEP_SECONDS": "0.2",
        **extra,
    }
    tokens = provision(database_url, env)
    count = 1 if database_url.startswith("sqlite") else 2
    servers = [ServerProcess(database_url, tmp_path, **env) for _ in range(count)]
    return Fleet(database_url, env, servers, https, tokens, {})


@pytest.fixture
def fleet(database_url: str, tmp_path: Path, https: Receiver) -> Iterator[Fleet]:
    running = start_fleet(database_url, tmp_path, https)
    yield running
    running.stop()


def dead_letters(got: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, p) for name, p in got if p["type"] == "scan.dead_lettered"]


def test_worker_failure_at_the_cap_is_announced_to_exactly_the_matching_hooks(
    fleet: Fleet,
) -> None:
    fleet.hook("all")
    fleet.hook("default", "--queue", "default")
    fleet.hook("other-queue", "--queue", "npm")
    fleet.hook("other-endpoint", endpoint="npm")
    with fleet.http(0) as a, fleet.http(1) as b:
        scan_id = fleet.submit(a)
        fleet.fail(b, fleet.lease(b), summary="first")
        fleet.fail(a, fleet.lease(a), summary="line\nbreak\u202e" + "x" * 5000)
    got = fleet.received(6)  # ready on submit and on requeue, then the dead letter: x2 hooks
    assert sorted(name for name, _ in got) == ["all"] * 3 + ["default"] * 3
    [(_, first), (_, second)] = dead_letters(got)
    assert first == second
    data = first["data"]
    assert set(data) == DEAD_FIELDS
    assert data["scan_id"] == scan_id and data["reason"] == "attempts_exhausted"
    assert data["attempts_total"] == 2 and data["source"] == "feed"
    assert data["package"] == {"name": "left-pad", "version": "1.3.0"} and data["kind"] == "malware"
    final = data["final_attempt"]
    assert final["seq"] == 2 and final["outcome"] == "failed" and final["artifact"] == "s3://logs/1"
    assert final["summary"].startswith("linebreakxxx") and final["summary"].endswith("\u2026")
    readies = [p["data"] for _, p in got if p["type"] == "scan.ready"]
    assert all(set(r) == READY_FIELDS for r in readies)
    assert sorted(r["attempt_count"] for r in readies) == [0, 0, 1, 1]
    ids = {r.headers["webhook-id"] for r in fleet.announced()}
    assert len(ids) == 6  # one id per notification, each hook its own


def test_owner_fail_at_the_cap_is_announced(fleet: Fleet) -> None:
    fleet.hook("all")
    with fleet.http(0) as a, fleet.http(1) as b:
        scan_id = fleet.submit(a)
        fleet.fail(a, fleet.lease(a))
        fleet.lease(b)
        failed = b.post(
            f"/api/v1/scans/{scan_id}/fail",
            headers=auth(fleet.tokens["owner"]),
            json={"summary": "operator says no"},
        )
        assert failed.status_code == 200, failed.text
    [(_, payload)] = dead_letters(fleet.received(3))
    data = payload["data"]
    assert data["reason"] == "attempts_exhausted" and data["final_attempt"]["seq"] == 2
    assert data["final_attempt"]["summary"] == "operator says no"


@pytest.fixture
def short_leases(database_url: str, tmp_path: Path, https: Receiver) -> Iterator[Fleet]:
    running = start_fleet(database_url, tmp_path, https, MAINFRAME_JOB_TIMEOUT="0.6")
    yield running
    running.stop()


def test_a_lapsed_lease_at_the_cap_is_reaped_and_announced(short_leases: Fleet) -> None:
    fleet = short_leases
    fleet.hook("all")
    with fleet.http(0) as a, fleet.http(1) as b:
        scan_id = fleet.submit(a)
        fleet.lease(a)
        # Polls find nothing until the 0.6 s lease lapses; the one that then reclaims it
        # (below the cap) announces the scan as ready again.
        fleet.lease_when_due(b)
    got = fleet.received(3)  # the sweeper reaps the second lapse
    [(_, payload)] = dead_letters(got)
    assert payload["data"]["scan_id"] == scan_id
    assert payload["data"]["reason"] == "lease_expired"
    assert payload["data"]["final_attempt"]["outcome"] == "lease_expired"


def test_a_lapsed_wait_at_the_cap_is_reaped_and_announced(fleet: Fleet) -> None:
    fleet.hook("all")
    with fleet.http(0) as a, fleet.http(1) as b:
        scan_id = fleet.submit(a)
        fleet.fail(a, fleet.lease(a))
        job = fleet.lease(b)
        waited = b.post(
            f"/api/v1/jobs/{scan_id}/wait",
            headers=auth(fleet.tokens["worker"]),
            json={
                "seconds": 0.5,
                "reason": "sandbox",
                "attempt": job["attempt"],
                "assignment_id": job["assignment_id"],
            },
        )
        assert waited.status_code == 200, waited.text
    [(_, payload)] = dead_letters(fleet.received(3))
    assert payload["data"]["reason"] == "interrupt_expired"


def test_silence_below_the_cap_and_for_unverified_scans_and_revocation(fleet: Fleet) -> None:
    fleet.hook("all")
    owner = auth(fleet.tokens["owner"])
    with fleet.http(0) as a, fleet.http(1) as b:
        fleet.submit(a)
        fleet.fail(b, fleet.lease(b))  # below the cap: a ready again, no dead letter
        assert len(fleet.received(2)) == 2
        quarantined = a.post(
            "/api/v1/scans", json={"endpoint": "pypi", "name": "q", "version": "1"}
        )
        assert quarantined.json()["status"] == "QUARANTINED"
        released = b.post(
            f"/api/v1/quarantine/{quarantined.json()['scan_id']}/release", headers=owner
        )
        assert released.status_code == 200, released.text
        mine = a.post(
            "/api/v1/scans", headers=owner, json={"endpoint": "pypi", "name": "o", "version": "1"}
        )
        assert mine.status_code == 201 and mine.json()["verified"] is False
        revoked = b.post("/api/v1/endpoints/pypi/revoke", headers=owner)
        assert revoked.json()["dead_lettered"] == 3
    assert len(fleet.received(2)) == 2  # nothing more arrived


def test_a_verified_resubmission_promotes_a_quarantined_scan_and_announces_it(
    fleet: Fleet,
) -> None:
    fleet.hook("all")
    with fleet.http(0) as a, fleet.http(1) as b:
        anonymous = a.post("/api/v1/scans", json={"endpoint": "pypi", "name": "q", "version": "1"})
        assert anonymous.json()["status"] == "QUARANTINED"
        fleet.control()
        assert fleet.announced() == []
        promoted = b.post(
            "/api/v1/scans",
            headers=auth(fleet.tokens["source"]),
            json={"name": "q", "version": "1"},
        )
        assert promoted.json()["scan_id"] == anonymous.json()["scan_id"]
    [(_, payload)] = fleet.received(1)
    assert (
        payload["type"] == "scan.ready" and payload["data"]["scan_id"] == promoted.json()["scan_id"]
    )


@pytest.fixture
def switched_off(database_url: str, tmp_path: Path, https: Receiver) -> Iterator[Fleet]:
    running = start_fleet(
        database_url, tmp_path, https, MAINFRAME_NOTIFY_HOOKS_ENABLED="false",
        MAINFRAME_MAX_JOB_ATTEMPTS="1",
    )  # fmt: skip
    # One more server with hooks on, for the control: the hook and receiver do work.
    running.servers.append(
        ServerProcess(database_url, tmp_path, **{**running.env, ENABLED: "true"})
    )
    yield running
    running.stop()


def test_the_kill_switch_silences_both_types(switched_off: Fleet) -> None:
    fleet = switched_off
    fleet.hook("all")
    with fleet.http(0) as a:
        fleet.submit(a)
        fleet.fail(a, fleet.lease(a))  # the cap is 1: a dead letter
        assert a.get("/api/v1/dead-letters", headers=auth(fleet.tokens["owner"])).json()["scans"]
        fleet.control(servers=[len(fleet.servers) - 1])
        metrics = a.get("/metrics").text
    assert fleet.announced() == []
    assert re.findall(r"^mainframe_hook_notifications_total\{.*\} (\S+)$", metrics, re.M)
    for count in re.findall(r"^mainframe_hook_notifications_total\{.*\} (\S+)$", metrics, re.M):
        assert float(count) == 0  # nothing was even queued


def signed_after_rotation(fleet: Fleet, timeout: float = 10.0) -> Received:
    """The first announcement signed twice: a server's cached hook list lasts a second, so
    one that cached it before the rotation still signs with the old secret alone."""

    def announce(a: httpx.Client) -> Received | None:
        heard = len(fleet.announced())
        fleet.submit(a, name=f"rotated-{heard}")
        got = fleet.https.wait_for(heard + 1)[-1]
        return got if " " in got.headers["webhook-signature"] else None

    with fleet.http(0) as a:
        return wait_for(
            lambda: announce(a),
            timeout=timeout,
            every=0.1,
            what="an announcement signed with both secrets",
        )


def test_rotation_signs_with_both_secrets_each_verifying(fleet: Fleet) -> None:
    fleet.hook("all")
    listed = cli(fleet.url, "hook", "list", "--endpoint", "pypi", **fleet.env)
    hook_id = listed.split()[0]
    old = fleet.secrets["all"]
    new = cli(fleet.url, "hook", "rotate", hook_id, "--endpoint", "pypi", **fleet.env)
    got = signed_after_rotation(fleet)
    first, second = got.headers["webhook-signature"].split(" ")
    Webhook(new).verify(got.body, {**got.headers, "webhook-signature": first})
    Webhook(old).verify(got.body, {**got.headers, "webhook-signature": second})


DISABLED = 'mainframe_hooks_disabled_total{reason="consecutive_failures"} 1.0'


def test_a_failing_hook_moves_the_delivery_counts_and_is_disabled(fleet: Fleet) -> None:
    fleet.https.default = Answer(500)
    fleet.hook("all")
    with fleet.http(0) as a:
        for n in range(10):
            fleet.submit(a, name=f"pkg{n}")
        fleet.https.wait_for(30)  # three attempts each
        minute = int(time.time() // 60 * 60)
        window = {
            "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(minute - 60)),
            "end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(minute + 60)),
        }
        owner = auth(fleet.tokens["owner"])

        def counted() -> dict[str, Any] | None:
            # The last attempt is counted just after the receiver answers it.
            got: dict[str, Any] = a.get(
                "/api/v1/deliveries/stats", headers=owner, params=window
            ).json()
            return got if got["attempts"] >= 30 else None

        stats = wait_for(counted, timeout=10, what="all 30 attempts counted")
        assert (stats["attempts"], stats["failures"]) == (30, 30)

        def disabled() -> str | None:
            # The hook is disabled just after its last attempt is counted.
            text: str = a.get("/metrics").text
            return text if DISABLED in text else None

        metrics = wait_for(disabled, timeout=10, what="the hook disabled")
        fleet.submit(a, name="after")
    assert 'mainframe_hook_attempts_total{result="5xx"} 30.0' in metrics
    assert 'mainframe_hook_notifications_total{outcome="failed",type="scan.ready"} 10.0' in metrics
    listed = cli(fleet.url, "hook", "list", "--endpoint", "pypi", **fleet.env)
    assert "no (consecutive_failures)" in listed
    fleet.control()
    assert len(fleet.announced()) == 30  # a disabled hook hears nothing more

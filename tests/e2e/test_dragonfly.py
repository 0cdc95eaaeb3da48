"""A dragonfly worker against real `mainframe serve` processes on SQLite and PostgreSQL: a
worker scripted after dragonfly-client-rs (tests/dragonflyworker.py) through its whole life,
the refusals a real server gives, a lapsed lease dead-lettered with its counter, log line
and signed hook, and a deleted token refused at once. SQLite signs sessions with the key file
beside the database; PostgreSQL with MAINFRAME_SECRET_KEY, two servers sharing it."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.fernet import Fernet

from mainframe.dragonfly.session import PURPOSE
from mainframe.settings import Settings
from mainframe.store import open_store
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.hooks.hook_secrets import KEY_FILE_SUFFIX, SecretBox
from tests.dragonflyworker import ScriptedWorker
from tests.e2e.test_hooks import Fleet, dead_letters, start_fleet
from tests.hookreceiver import Receiver, receiver
from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli

RULE = "rule base { condition: false }\n"
DISTRIBUTIONS = ["https://files.example/left-pad-1.3.0.tar.gz"]


@dataclass
class Deployment:
    url: str  # the database
    env: dict[str, str]
    servers: list[ServerProcess]
    rules: Path
    tokens: dict[str, str]
    tmp: Path

    def base(self, index: int = 0) -> str:
        return f"{self.servers[index % len(self.servers)].url}/dragonfly"

    def api(self, index: int = 0) -> httpx.Client:
        return httpx.Client(base_url=self.servers[index % len(self.servers)].url, timeout=10)

    def owner(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens['owner']}"}

    def submit(self, name: str, **payload: Any) -> int:
        with self.api() as http:
            response = http.post(
                "/api/v1/scans",
                headers={"Authorization": f"Bearer {self.tokens['feed']}"},
                json={"name": name, "version": "1.3.0", "payload": payload or None},
            )
        assert response.status_code == 201, response.text
        scan_id: int = response.json()["scan_id"]
        return scan_id

    def scan(self, scan_id: int) -> dict[str, Any]:
        with self.api() as http:
            found: dict[str, Any] = http.get(
                f"/api/v1/scans/{scan_id}", headers=self.owner()
            ).json()
        return found

    def session_key(self) -> bytes:
        """The key the servers derive (the test derives it from the same secret key)."""
        key = self.env.get("MAINFRAME_SECRET_KEY")
        if key is None:
            key = Path(self.url.removeprefix("sqlite:///") + KEY_FILE_SUFFIX).read_text().strip()
        return SecretBox([key.encode()]).subkeys(PURPOSE)[0]

    def restart(self) -> None:
        for server in self.servers:
            server.stop()
        self.servers = [ServerProcess(self.url, self.tmp, **self.env) for _ in self.servers]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def events(self) -> list[dict[str, Any]]:
        return [event for server in self.servers for event in server.log_events()]


@pytest.fixture
def deployment(database_url: str, tmp_path: Path) -> Iterator[Deployment]:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "base.yara").write_text(RULE)
    env = {"MAINFRAME_DRAGONFLY_RULES_DIR": str(rules), "MAINFRAME_MAX_JOB_ATTEMPTS": "3"}
    if not database_url.startswith("sqlite"):
        env["MAINFRAME_SECRET_KEY"] = Fernet.generate_key().decode()
    tokens = asyncio.run(_provision(database_url))
    count = 1 if database_url.startswith("sqlite") else 2
    servers = [ServerProcess(database_url, tmp_path, **env) for _ in range(count)]
    running = Deployment(database_url, env, servers, rules, tokens, tmp_path)
    yield running
    running.stop()
    assert all(event["event"] != "unhandled_error" for event in running.events())


async def _provision(database_url: str) -> dict[str, str]:
    """An owner, endpoint `pypi`, workers w1 and w2 and source `feed`, in this process (a CLI
    process per credential would cost a second each)."""
    store = open_store(Settings(database_url=database_url))
    try:
        tokens = {"owner": await store.owners.create_owner("ops")}
        await store.owners.create_endpoint(
            await store.owners.owner_id("ops"), "pypi", open_intake=False, origin="cli"
        )
        for name, role in (("w1", "worker"), ("w2", "worker"), ("feed", "source")):
            tokens[name] = (
                await store.owners.create_token(
                    OPERATOR, "pypi", role=role, principal=name, origin="cli"
                )
            )[1]
        return tokens
    finally:
        await store.close()


class WorkerClock:
    """The worker's own clock, moved by the test to make it handshake again."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def _success(job: dict[str, Any]) -> dict[str, Any]:
    return {"score": 5, "inspector_url": None, "rules_matched": ["base"], "commit": job["hash"]}


def test_a_worker_lives_its_whole_life(deployment: Deployment, tmp_path: Path) -> None:
    first = deployment.submit("left-pad", distributions=DISTRIBUTIONS)
    lines = [{"name": n, "version": "1.3.0", "payload": {"distributions": DISTRIBUTIONS}}
             for n in ("flaky", "late")]  # fmt: skip
    (tmp_path / "scans.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    cli(deployment.url, "submit", str(tmp_path / "scans.jsonl"), "--url",
        deployment.servers[0].url, "--token", deployment.tokens["feed"])  # fmt: skip
    clock = WorkerClock()
    worker = ScriptedWorker(deployment.base(), "w1", deployment.tokens["w1"], clock=clock,
                            load_duration=60)  # fmt: skip
    worker.start()
    assert worker.rules == {"base": RULE}

    done = worker.step(_success)
    assert done is not None and done.status == 200, done
    finished = deployment.scan(first)
    assert finished["status"] == "FINISHED"
    assert finished["result"] == _success({"hash": worker.rules_hash})

    # A failure is retryable: the scan goes back to the queue behind the others.
    done = worker.step(lambda job: {"reason": "timed out downloading"})
    assert done is not None and done.status == 200 and done.json()["status"] == "QUEUED"

    # A changed rule reaches the worker through the next job's hash.
    (deployment.rules / "extra.yara").write_text("rule extra { condition: true }\n")
    before = len(worker.sent("GET", "/dragonfly/rules"))
    # w1's own token: another worker's use, once flushed, would read as that worker asking,
    # and the retry of "flaky" would then wait a minute for it (lifecycle/elsewhere.py).
    bearer = {"Authorization": f"Bearer {deployment.tokens['w1']}"}
    with httpx.Client() as http:
        wait_for(  # the server looks at the directory once a second
            lambda: (
                "extra" in http.get(f"{deployment.base()}/rules", headers=bearer).json()["rules"]
            ),
            timeout=5,
            every=0.1,
            what="the server read the new rule",
        )
    done = worker.step(_success)  # the third scan, "late"
    assert done is not None and done.status == 200, done
    assert len(worker.sent("GET", "/dragonfly/rules")) == before + 1
    assert sorted(worker.rules) == ["base", "extra"]

    # Its second attempt comes back; a body without the pair counts only for attempt 1.
    done = worker.step(_success)
    assert done is not None and (done.status, done.json()["error"]) == (409, "stale_assignment")
    flaky = deployment.scan(worker.sent("POST", "/dragonfly/jobs")[-1].json()[0]["scan_id"])
    assert flaky["status"] == "PENDING" and flaky["attempt_count"] == 2
    assert flaky["attempts"][0]["summary"] == "timed out downloading"

    # An empty queue: the worker sleeps its load duration.
    assert worker.step(_success) is None and worker.slept == 60

    # The session survives a restart of every server; past exp the worker handshakes again.
    handshakes = len(worker.sent("GET", "/dragonfly"))
    deployment.restart()
    worker.base_url = deployment.base(1)
    assert worker.step(_success) is None
    assert len(worker.sent("GET", "/dragonfly")) == handshakes
    old = worker.jar.value("CF_Authorization")
    clock.offset = worker.exp - time.time() + 1
    assert worker.step(_success) is None
    assert len(worker.sent("GET", "/dragonfly")) == handshakes + 1
    assert worker.jar.value("CF_Authorization") != old
    assert worker.exchanges[-1].status == 200
    assert all(e.status < 500 for e in worker.exchanges)


def test_the_worker_writes_its_requests_as_the_rust_worker_does(deployment: Deployment) -> None:
    deployment.submit("left-pad", distributions=DISTRIBUTIONS)
    worker = ScriptedWorker(deployment.base(), "w1", deployment.tokens["w1"])
    worker.start()
    worker.step(_success)
    handshake, rules, poll, report = worker.exchanges
    assert (handshake.method, handshake.target) == ("GET", "/dragonfly")
    assert ("cf-access-client-id", "w1") in handshake.headers
    cookie = next(v for k, v in handshake.reply_headers if k.lower() == "set-cookie")
    assert cookie.endswith("; Path=/dragonfly; HttpOnly") and "Domain" not in cookie
    assert (poll.method, poll.target, poll.body) == ("POST", "/dragonfly/jobs?batch=1", b"")
    for exchange in (rules, poll, report):
        names = [key for key, _ in exchange.headers]
        assert "authorization" not in names and "cf-access-client-secret" not in names
        assert dict(exchange.headers)["cookie"].startswith("CF_Authorization=")
    assert "content-type" not in dict(poll.headers)
    assert (report.method, report.target) == ("PUT", "/dragonfly/package")
    assert dict(report.headers)["content-type"] == "application/json"
    [job] = poll.json()
    assert job["distributions"] == DISTRIBUTIONS and job["hash"] == rules.json()["hash"]


def _handshake(deployment: Deployment, headers: dict[str, str]) -> httpx.Response:
    with httpx.Client() as http:
        return http.get(deployment.base(), headers=headers)


def _forgeries(deployment: Deployment, good: str) -> dict[str, str]:
    header, payload, signature = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))

    def b64(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    key = deployment.session_key()
    return {
        "garbage": "garbage",
        "alg none": f"{b64({'alg': 'none', 'typ': 'JWT'})}.{payload}.",
        "edited payload": f"{header}.{b64(claims | {'token_id': 999})}.{signature}",
        "wrong key": jwt.encode(claims, b"w" * 32, algorithm="HS256"),
        "expired": jwt.encode(claims | {"exp": int(time.time()) - 1}, key, algorithm="HS256"),
    }


def test_a_real_server_refuses_what_it_must(deployment: Deployment) -> None:
    w1, w2 = deployment.tokens["w1"], deployment.tokens["w2"]
    handshakes = {
        "wrong secret": {"CF-Access-Client-Id": "w1", "CF-Access-Client-Secret": w1 + "x"},
        "another worker's": {"CF-Access-Client-Id": "w1", "CF-Access-Client-Secret": w2},
        "unknown name": {"CF-Access-Client-Id": "w9", "CF-Access-Client-Secret": w1},
        "source token": {"CF-Access-Client-Id": "feed",
                         "CF-Access-Client-Secret": deployment.tokens["feed"]},
        "no headers": {},
    }  # fmt: skip
    for case, headers in handshakes.items():
        response = _handshake(deployment, headers)
        assert response.status_code == 401 and "set-cookie" not in response.headers, case

    good = _handshake(deployment, {"CF-Access-Client-Id": "w1", "CF-Access-Client-Secret": w1})
    session = good.cookies["CF_Authorization"]
    with httpx.Client(base_url=deployment.servers[-1].url) as http:
        for case, token in _forgeries(deployment, session).items():
            jar = {"Cookie": f"CF_Authorization={token}"}
            for method, path in (("GET", "/rules"), ("POST", "/jobs"), ("PUT", "/package")):
                response = http.request(method, f"/dragonfly{path}", headers=jar)
                assert response.status_code == 401, (case, path, response.text)
        assert http.post("/dragonfly/jobs").status_code == 401  # no cookie

    deployment.submit("held")
    theirs = ScriptedWorker(deployment.base(), "w2", w2)
    theirs.start()
    assert theirs.poll()[0]["name"] == "held"
    worker = ScriptedWorker(deployment.base(1), "w1", w1)
    worker.start()
    key = {"version": "1.3.0", "score": 1, "inspector_url": None, "rules_matched": [],
           "commit": "c"}  # fmt: skip
    results = {
        "unknown": ({"name": "nope", **key}, 404),
        "leased to another": ({"name": "held", **key}, 409),
        "score as text": ({"name": "held", **key, "score": "x"}, 422),
        "no name": (key, 422),
    }
    for case, (body, status) in results.items():
        assert worker.report(body).status == status, case
    malformed = worker.send("PUT", f"{deployment.base()}/package", b"{not json")
    assert malformed.status == 422
    assert worker.send("POST", f"{deployment.base()}/jobs?batch=abc").status == 422


@pytest.fixture
def https() -> Iterator[Receiver]:
    with receiver("localhost", "127.0.0.1") as running:
        yield running


@pytest.fixture
def short_leases(database_url: str, tmp_path: Path, https: Receiver) -> Iterator[Fleet]:
    running = start_fleet(database_url, tmp_path, https, MAINFRAME_JOB_TIMEOUT="0.6")
    yield running
    running.stop()


def _dead_lettered_total(fleet: Fleet) -> float:
    total = 0.0
    for index in range(len(fleet.servers)):
        with fleet.http(index) as http:
            for line in http.get("/metrics").text.splitlines():
                if line.startswith("packages_dead_lettered_total "):
                    total += float(line.split()[1])
    return total


def test_a_lease_the_worker_never_reports_is_dead_lettered_and_announced(
    short_leases: Fleet,
) -> None:
    fleet = short_leases
    fleet.hook("all")
    with fleet.http() as http:
        scan_id = fleet.submit(http)
    worker = ScriptedWorker(f"{fleet.servers[0].url}/dragonfly", "w1", fleet.tokens["worker"])
    worker.start()
    assert worker.poll()[0]["attempt"] == 1  # and never reports it
    second = wait_for(worker.poll, timeout=10, every=0.1, what="the lapsed lease retaken")
    assert second[0]["attempt"] == 2
    # The budget is 2: once the second lease lapses, the sweeper dead-letters the scan.
    [(_, payload)] = dead_letters(fleet.received(3))
    data = payload["data"]
    assert data["scan_id"] == scan_id and data["reason"] == "lease_expired"
    assert data["attempts_total"] == 2 and data["final_attempt"]["outcome"] == "lease_expired"
    assert _dead_lettered_total(fleet) == 1.0
    logged = [
        event
        for server in fleet.servers
        for event in server.log_events()
        if event["event"] == "scan_dead_lettered"
    ]
    assert [(e["scan_id"], e["reason"], e["level"], e["prior_worker"]) for e in logged] == [
        (scan_id, "lease_expired", "error", "w1")
    ]
    late = worker.report({"name": "left-pad", "version": "1.3.0", "reason": "too late"})
    assert (late.status, late.json()["error"]) == (409, "already_terminal")


def test_a_deleted_token_is_refused_at_once(deployment: Deployment) -> None:
    deployment.submit("left-pad")
    by_api = ScriptedWorker(deployment.base(), "w1", deployment.tokens["w1"])
    by_cli = ScriptedWorker(deployment.base(1), "w2", deployment.tokens["w2"])
    for worker in (by_api, by_cli):
        worker.start()
        worker.poll()
    with deployment.api(1) as http:
        listed = http.get("/api/v1/endpoints/pypi/tokens", headers=deployment.owner()).json()
        ids = {token["name"]: token["token_id"] for token in listed["tokens"]}
        gone = http.delete(f"/api/v1/endpoints/pypi/tokens/{ids['w1']}", headers=deployment.owner())
        assert gone.status_code == 204
    cli(deployment.url, "token", "delete", str(ids["w2"]), "--endpoint", "pypi", **deployment.env)
    for worker in (by_api, by_cli):
        assert worker.send("POST", f"{worker.base_url}/jobs?batch=1").status == 401
        assert worker.fetch_rules().status == 401
        refused = worker.report({"name": "left-pad", "version": "1.3.0", "reason": "x"})
        assert refused.status == 401


def test_the_scripted_cookie_jar_sends_only_below_the_cookie_path() -> None:
    """The jar's rules, on a loopback listener that records what arrives."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        seen: list[bytes] = []

        def answer() -> None:
            for reply in (b"Set-Cookie: CF_Authorization=t; Path=/dragonfly; HttpOnly\r\n", b""):
                conn, _ = listener.accept()
                with conn:
                    seen.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 200 OK\r\n" + reply + b"Content-Length: 2\r\n\r\n[]")

        thread = threading.Thread(target=answer)
        thread.start()
        worker = ScriptedWorker(f"http://127.0.0.1:{port}/dragonfly", "w", "s")
        worker.send("GET", worker.base_url)
        worker.send("POST", f"http://127.0.0.1:{port}/other")
        thread.join(timeout=10)
    assert worker.jar.header("/dragonfly/jobs", https=False) == "CF_Authorization=t"
    assert worker.jar.header("/dragonflyx", https=False) is None
    assert b"cookie:" not in seen[1].lower()
    assert seen[1].startswith(b"POST /other HTTP/1.1\r\n") and b"content-length: 0" in seen[1]

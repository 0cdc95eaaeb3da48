"""PostgreSQL behind PgBouncer as operators run it (docs/scale-out.md): two `mainframe serve`
processes through a real PgBouncer in transaction pooling (and one in session pooling), with
nothing set on the pooler beyond `ignore_startup_parameters = extra_float_digits`, and
through PgBouncer 1.24 in transaction pooling with `max_prepared_statements` (the servers
told so, `MAINFRAME_DATABASE_POOLER_PREPARES`). Bulk intake, sixteen workers with
complete-and-fetch until every scan is finished once, the operator's routes, hooks to a real
receiver: no error answer and no error log line."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from standardwebhooks.webhooks import Webhook

from mainframe.client import Client, Job, ResultReport
from tests.hookreceiver import Receiver, receiver
from tests.integration.test_every_route_input import requests
from tests.pgbouncer import PgBouncer, functions_made
from tests.serverproc import ServerProcess, cli

SCANS = 2_000
WORKERS = 16
DEADLINE_S = 120.0  # the whole worker loop, far above what it takes
POOLER_SIZE = 10  # PgBouncer's server connections to the database


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def https() -> Iterator[Receiver]:
    with receiver("localhost", "127.0.0.1") as running:
        yield running


def _env(mode: str, prepares: bool, https: Receiver, tmp_path: Path) -> dict[str, str]:
    return {
        "MAINFRAME_DATABASE_POOLER": mode,
        "MAINFRAME_DATABASE_POOLER_PREPARES": str(prepares).lower(),
        # Session pooling gives each client connection a server connection for its life:
        # the servers' pools together stay within the pooler's (docs/scale-out.md).
        "MAINFRAME_POOL_SIZE": str(POOLER_SIZE // 2 - 1),
        "SSL_CERT_FILE": str(https.write_ca(tmp_path / "ca.pem")),
        "MAINFRAME_HOOKS_ALLOW_CIDRS": "127.0.0.0/8,::1/128",
        "MAINFRAME_SECRET_KEY": Fernet.generate_key().decode(),
        "MAINFRAME_MAX_JOB_ATTEMPTS": "1",
        "MAINFRAME_SWEEP_SECONDS": "0.5",
        "MAINFRAME_METRICS_REFRESH_SECONDS": "0.5",
    }


def _provision(url: str, env: dict[str, str], https: Receiver) -> dict[str, str]:
    owner = cli(url, "owner", "create", "ops", **env)
    cli(url, "endpoint", "create", "pypi", "--owner", "ops", "--open-intake", **env)
    tokens = {
        "owner": owner,
        "source": cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed", **env),
    }
    for index in range(WORKERS):
        tokens[f"w{index}"] = cli(
            url, "token", "create", "--endpoint", "pypi", "--worker", f"w{index}", **env
        )
    # Announcements of the `alerts` queue only: its scans are few, so none is rate-limited.
    target = f"https://localhost:{https.port}/alerts"
    tokens["hook"] = cli(
        url, "hook", "create", "--endpoint", "pypi", target, "--queue", "alerts", **env
    )
    return tokens


def _bulk(http: httpx.Client, source: str) -> None:
    for start in range(0, SCANS, 1000):
        scans = [{"name": f"pkg-{i}", "version": "1.0"} for i in range(start, start + 1000)]
        response = http.post("/api/v1/scans/batch", headers=auth(source), json={"scans": scans})
        assert response.status_code == 200, response.text
        assert {item["status"] for item in response.json()["results"]} == {201}


def _work(url: str, token: str, statuses: Counter[str], lock: threading.Lock) -> None:
    """A worker: poll when it holds nothing, else finish its job and take the next with it."""
    with Client(url, token) as client:
        job: Job | None = None
        idle_polls = 0
        while idle_polls < 3:
            if job is None:
                jobs = client.lease(1)
                job = jobs[0] if jobs else None
                idle_polls = 0 if job else idle_polls + 1
                continue
            done = client.complete(job, ResultReport("finished", summary="clean"), next=1)
            with lock:
                statuses[done.scan["status"]] += 1
            job = done.jobs[0] if done.jobs else None


def _loop(servers: list[ServerProcess], tokens: dict[str, str]) -> Counter[str]:
    statuses: Counter[str] = Counter()
    lock = threading.Lock()
    threads = [
        threading.Thread(
            target=_work,
            args=(servers[i % len(servers)].url, tokens[f"w{i}"], statuses, lock),
            daemon=True,
        )
        for i in range(WORKERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), "a worker was still working at the deadline"
    return statuses


def _operator_routes(http: httpx.Client, tokens: dict[str, str]) -> None:
    owner = auth(tokens["owner"])
    gets = [
        "/api/v1/scans?limit=5",
        "/api/v1/scans/1",
        "/api/v1/overview",
        "/api/v1/endpoints",
        "/api/v1/endpoints/pypi/tokens",
        "/api/v1/endpoints/pypi/hooks",
        "/api/v1/dead-letters?limit=5",
        "/api/v1/audit?limit=5",
    ]
    for path in gets:
        response = http.get(path, headers=owner)
        assert response.status_code == 200, (path, response.text)
    made = http.post("/api/v1/endpoints", headers=owner, json={"name": "npm"})
    assert made.status_code == 201, made.text
    token = http.post("/api/v1/endpoints/npm/tokens", headers=owner, json={"worker": "n1"})
    assert token.status_code == 201, token.text
    dropped = http.delete(f"/api/v1/endpoints/npm/tokens/{token.json()['token_id']}", headers=owner)
    assert dropped.status_code in (200, 204), dropped.text


def _dead_letter(http: httpx.Client, tokens: dict[str, str]) -> int:
    """A scan of the announced queue failed at its only attempt (a dead letter), redriven."""
    sent = {"name": "left-pad", "version": "1.3.0", "queue": "alerts"}
    made = http.post("/api/v1/scans", headers=auth(tokens["source"]), json=sent)
    assert made.status_code == 201, made.text
    scan_id: int = made.json()["scan_id"]
    with Client(str(http.base_url), tokens["w0"]) as client:
        [job] = [j for j in client.lease(5) if j.scan_id == scan_id]
        assert client.report(job, ResultReport("failed", summary="boom"))["dead_lettered_at"]
    redrive = http.post(
        "/api/v1/dead-letters/redrive",
        headers=auth(tokens["owner"]),
        json={"scan_ids": [scan_id]},
    )
    assert (redrive.status_code, redrive.json()["redriven"]) == (200, 1), redrive.text
    return scan_id


def _every_route(http: httpx.Client, tokens: dict[str, str], https: Receiver) -> None:
    """Every operation of the OpenAPI document, its valid request as each credential (the
    destructive ones last): none answers 5xx, and the owner's reads answer."""
    document = http.get("/openapi.json").json()
    read = 0
    for method, url, sent, template in requests(document):
        if template is None:
            continue  # only the valid request of each operation
        body = sent
        if template == "/api/v1/endpoints/{name}/hooks" and method == "post":
            # The walk's hook announces to the test's receiver, never off this machine.
            body = dict(sent, url=f"https://localhost:{https.port}/walk")
        for who in ("owner", "w0", "source"):
            kw: dict[str, Any] = {} if body is None else {"json": body}
            done = http.request(method.upper(), url, headers=auth(tokens[who]), **kw)
            assert done.status_code < 500, (method, url, who, done.text[:300])
            if who == "owner" and method == "get" and template.startswith("/api/v1/"):
                read += done.status_code == 200  # the walk's fixed values do not suit all
    assert read >= 6, "the owner's read routes answered through the pooler"


def _errors(server: ServerProcess) -> list[dict[str, Any]]:
    expected = {"scan_dead_lettered"}  # the dead letter this test makes on purpose
    return [
        event
        for event in server.log_events()
        if (event.get("level") in ("error", "critical") and event.get("event") not in expected)
        or event.get("event") == "database_settings_not_in_force"
    ]


@pytest.mark.parametrize(
    ("mode", "prepares"),
    [("transaction", False), ("session", False), ("transaction", True)],
    ids=["transaction", "session", "transaction-keeping-prepared-statements"],
)
def test_two_servers_through_pgbouncer_serve_a_fleet(
    mode: str, prepares: bool, pg_url: str, tmp_path: Path, https: Receiver
) -> None:
    count = 2
    env = _env(mode, prepares, https, tmp_path)
    # As an operator runs it: the upgrade against the database itself, once per release; it
    # makes the relied-on settings the role's defaults there (the pooler's sessions get them).
    cli(pg_url, "db", "upgrade", **env)
    with PgBouncer(mode, pool_size=POOLER_SIZE, keeps_prepared=prepares) as pooler:
        url = pooler.url(pg_url.rpartition("/")[2])
        tokens = _provision(url, env, https)
        servers = [ServerProcess(url, tmp_path, **env) for _ in range(count)]
        try:
            with httpx.Client(base_url=servers[0].url, timeout=30) as http:
                _bulk(http, tokens["source"])
                statuses = _loop(servers, tokens)
                assert statuses == Counter({"FINISHED": SCANS}), "every scan finished once"
                stats = http.get("/metrics").text
                assert 'packages_scan_outcomes{outcome="finished"}' in stats
                _operator_routes(http, tokens)
                dead = _dead_letter(http, tokens)
                ready = https.wait_for(3)  # scan.ready, scan.dead_lettered, scan.ready (redrive)
                events = [Webhook(tokens["hook"]).verify(r.body, r.headers) for r in ready]
                kinds = Counter(e["type"] for e in events)
                assert kinds == Counter({"scan.ready": 2, "scan.dead_lettered": 1})
                assert {e["data"]["scan_id"] for e in events} == {dead}
                _every_route(http, tokens, https)
        finally:
            for server in servers:
                server.stop()
        for server in servers:
            assert _errors(server) == [], server.tail()
        assert "ERROR" not in pooler.log() or "client_login_timeout" in pooler.log(), pooler.log()
    made = functions_made(pg_url)
    if mode == "transaction" and not prepares:
        # The hot statements (a fleet at batch 1: a result of one) went as calls of functions,
        # each made once by one of the servers.
        assert {"lease", "complete_one", "authenticate"} <= made.keys(), made
        assert set(made.values()) == {1}, made
    else:
        assert made == {}, "the servers kept prepared statements: the pooler keeps them"

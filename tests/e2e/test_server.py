"""A real `mainframe serve` on loopback, driven as a source, a worker and an operator would."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.polling import wait_for
from tests.serverproc import ServerProcess, cli, mainframe_env


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def provision(url: str) -> dict[str, str]:
    cli(url, "db", "upgrade")  # as an operator would, before any other command
    owner = cli(url, "owner", "create", "ops")
    cli(url, "endpoint", "create", "pypi", "--owner", "ops")
    return {
        "owner": owner,
        "worker": cli(url, "token", "create", "--endpoint", "pypi", "--worker", "scanner-1"),
        "source": cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed"),
    }


def test_first_start_creates_the_sqlite_file_and_prints_an_owner_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    with ServerProcess(url, tmp_path) as server:
        token = server.stdout_path.read_text().strip().splitlines()[-1]
        assert token.startswith("mfo_")
        response = httpx.get(server.url + "/api/v1/scans", headers=auth(token))
        assert response.status_code == 200 and response.json()["scans"] == []
    assert (tmp_path / "mainframe.db").exists()
    with ServerProcess(url, tmp_path) as again:
        assert "bootstrap" not in again.stdout_path.read_text()


def test_bad_setting_stops_start_up_with_one_clear_line(tmp_path: Path) -> None:
    env = mainframe_env(f"sqlite:///{tmp_path / 'x.db'}", MAINFRAME_JOB_TIMEOUT="-3")
    done = subprocess.run(
        [sys.executable, "-m", "mainframe", "serve"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "mainframe: invalid setting MAINFRAME_JOB_TIMEOUT: Input should be greater than 0"
    )


@pytest.mark.slow
def test_lapsed_leases_are_reassigned_then_swept_into_a_logged_dead_letter(
    database_url: str, tmp_path: Path
) -> None:
    tokens = provision(database_url)
    env = {
        "MAINFRAME_JOB_TIMEOUT": "1",
        "MAINFRAME_MAX_JOB_ATTEMPTS": "2",
        "MAINFRAME_SWEEP_SECONDS": "0.5",
    }
    with (
        ServerProcess(database_url, tmp_path, **env) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        created = http.post(
            "/api/v1/scans",
            headers=auth(tokens["source"]),
            json={"name": "left-pad", "version": "1.3.0", "queue": "npm"},
        )
        scan_id = created.json()["scan_id"]
        [first] = http.post("/api/v1/jobs", headers=auth(tokens["worker"])).json()
        # The one-second lease lapses; the next poll that finds the scan leases it again.
        [second] = wait_for(
            lambda: http.post("/api/v1/jobs", headers=auth(tokens["worker"])).json(),
            timeout=15,
            what="the lapsed lease leased again",
        )
        assert (first["attempt"], second["attempt"]) == (1, 2)
        assert first["assignment_id"] != second["assignment_id"]
        # Nobody polls again: the sweeper alone must dead-letter the scan.
        view = wait_for(
            lambda: (lambda v: v if v["status"] == "FAILED" else None)(
                http.get(f"/api/v1/scans/{scan_id}", headers=auth(tokens["owner"])).json()
            ),
            timeout=15,
            what="the sweeper dead-lettered the scan",
        )
        assert view["fail_reason"] == "lease_expired" and view["dead_lettered_at"]
        assert [a["outcome"] for a in view["attempts"]] == ["lease_expired", "lease_expired"]
        late = http.post(
            f"/api/v1/jobs/{scan_id}/result",
            headers=auth(tokens["worker"]),
            json={"outcome": "finished", "attempt": 2, "assignment_id": second["assignment_id"]},
        )
        assert late.status_code == 409 and late.json()["error"] == "already_terminal"
        # The sweeper counts a dead letter just after it commits it.
        metrics = wait_for(
            lambda: (lambda t: t if "packages_dead_lettered_total 1.0" in t else None)(
                http.get("/metrics").text
            ),
            timeout=10,
            what="the dead letter counted",
        )
    assert "packages_fail_total 1.0" in metrics
    [line] = [e for e in server.log_events() if e["event"] == "scan_dead_lettered"]
    assert line["level"] == "error"
    assert {
        k: line[k]
        for k in (
            "package_name",
            "package_version",
            "attempt_count",
            "prior_worker",
            "reason",
            "scan_id",
            "endpoint",
            "queue",
        )
    } == {
        "package_name": "left-pad",
        "package_version": "1.3.0",
        "attempt_count": 2,
        "prior_worker": "scanner-1",
        "reason": "lease_expired",
        "scan_id": scan_id,
        "endpoint": "pypi",
        "queue": "npm",
    }
    assert line["leased_at"].endswith("Z")
    assert any(e["event"] == "stale_result_rejected" for e in server.log_events())


def test_worker_command_runs_each_scan(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    tokens = provision(url)
    with ServerProcess(url, tmp_path) as server, httpx.Client(base_url=server.url) as http:
        ids = [
            http.post(
                "/api/v1/scans",
                headers=auth(tokens["source"]),
                json={"name": f"pkg{i}", "version": "1"},
            ).json()["scan_id"]
            for i in range(3)
        ]
        script = (
            "import os, sys; print('scanned', os.environ['MAINFRAME_SCAN_NAME'], "
            "os.environ['MAINFRAME_SCAN_VERSION']); "
            "sys.exit(0 if os.environ['MAINFRAME_SCAN_NAME'] != 'pkg1' else 100)"
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mainframe",
                "worker",
                "--url",
                server.url,
                "--token",
                tokens["worker"],
                "--idle-exit",
                "--",
                sys.executable,
                "-c",
                script,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=mainframe_env(url),
        )
        assert done.returncode == 0, done.stderr
        views = [http.get(f"/api/v1/scans/{i}", headers=auth(tokens["owner"])).json() for i in ids]
    assert done.stdout.splitlines()[-1] == "3 scans in 3 attempts: 2 finished, 1 permanent failure"
    assert [v["status"] for v in views] == ["FINISHED", "FAILED", "FINISHED"]
    assert views[0]["attempts"][0]["artifact"] == "scanned pkg0 1"
    assert views[1]["fail_reason"] == "failed"


def test_stats_command_prints_the_reconciled_figures(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    tokens = provision(url)
    with ServerProcess(url, tmp_path) as server, httpx.Client(base_url=server.url) as http:
        for name in ("a", "b", "c"):
            http.post(
                "/api/v1/scans", headers=auth(tokens["source"]), json={"name": name, "version": "1"}
            )
        [job] = http.post("/api/v1/jobs", headers=auth(tokens["worker"])).json()
        http.post(
            f"/api/v1/jobs/{job['scan_id']}/result",
            headers=auth(tokens["worker"]),
            json={"outcome": "finished", "attempt": 1, "assignment_id": job["assignment_id"]},
        )
    figures = json.loads(cli(url, "stats", "--json"))
    assert figures["outcomes"] == {"finished": 1, "failed": 0, "dead_lettered": 0}
    assert figures["queue"]["queued"] == 2 and figures["queue"]["exhausted"] == 0
    assert figures["oldest_queued_age_seconds"] >= 0


def test_an_oversized_body_sent_without_expect_gets_a_readable_413(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    tokens = provision(url)
    body = b'{"name": "x", "version": "1", "payload": "' + b"a" * 3_000_000 + b'"}'
    with (
        ServerProcess(url, tmp_path) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock,
    ):
        head = (
            "POST /api/v1/scans HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {tokens['source']}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)  # a reset here would raise ConnectionResetError
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413"), answer[:200]
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["error"] == "body_too_large"


def mainframe(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mainframe", *args],
        capture_output=True, text=True, timeout=60, check=False, env=mainframe_env(url),
    )  # fmt: skip


def test_a_refusal_from_the_server_is_told_in_words(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    tokens = provision(url)
    lines = tmp_path / "scans.jsonl"
    lines.write_text('{"name": "ok", "version": "1"}\n{"name": "", "version": "1"}\n')
    unknown = "mainframe: unknown token, or its endpoint is revoked (unauthorized)\n"
    with ServerProcess(url, tmp_path) as server:
        worker = mainframe(url, "worker", "--url", server.url, "--token", "mfw_nope", "--", "true")
        assert (worker.returncode, worker.stderr.splitlines(True)[-1]) == (1, unknown)
        submit = mainframe(url, "submit", "--url", server.url, "--token", "mfs_nope", str(lines))
        assert (submit.returncode, submit.stderr, submit.stdout) == (1, unknown, "")
        refused = mainframe(url, "submit", "--url", server.url, "--token", tokens["source"],
                            str(lines))  # fmt: skip
    assert refused.returncode == 1 and refused.stdout == "2 lines: 1 \u00d7 201, 1 \u00d7 422\n"
    assert refused.stderr == (
        "line 2: name: String should have at least 1 character (invalid_request)\n"
    )


def test_a_port_in_use_is_one_line_and_a_refusal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for workers in ("1", "2"):
            done = mainframe(url, "serve", "--port", port, "--workers", workers)
            assert done.returncode == 1, done.stderr
            assert done.stderr.splitlines()[-1] == (
                f"mainframe: the server did not start on http://127.0.0.1:{port}; "
                "the log line above says why"
            )

"""schemathesis against a live server with each kind of credential (docs/reliability.md): every
response is in the document (status, content type, headers, body schema), no 5xx, refusals of
bad data, 405 with the right Allow, and no "missing header accepted".

`positive_data_acceptance` stays off: a few rules cannot be said in the schema and are refused
with a documented 4xx (an owner's submission must name its endpoint; a hook URL must not point
at a private address; a stats window must not be empty). The kill switch keeps hooks silent, so
nothing the fuzzer registers is ever delivered off the machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.serverproc import ServerProcess, cli

EXAMPLES = "25"


@pytest.mark.slow
def test_schemathesis_finds_nothing_with_any_credential(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    cli(url, "db", "upgrade")  # as an operator would, before any other command
    owner = cli(url, "owner", "create", "ops")
    cli(url, "endpoint", "create", "pypi", "--owner", "ops", "--open-intake")
    tokens = {
        "owner": owner,
        "worker": cli(url, "token", "create", "--endpoint", "pypi", "--worker", "w1"),
        "source": cli(url, "token", "create", "--endpoint", "pypi", "--source", "feed"),
    }
    schemathesis = Path(sys.executable).parent / "schemathesis"
    with ServerProcess(url, tmp_path, MAINFRAME_NOTIFY_HOOKS_ENABLED="false") as server:
        for number in range(5):  # something to lease, look at and fail
            httpx.post(
                f"{server.url}/api/v1/scans",
                json={"name": f"pkg{number}", "version": "1"},
                headers={"Authorization": f"Bearer {tokens['source']}"},
            )
        runs = {
            who: subprocess.run(
                [
                    str(schemathesis),
                    "run",
                    f"{server.url}/openapi.json",
                    "--checks",
                    "all",
                    "--exclude-checks",
                    "positive_data_acceptance",
                    "--header",
                    f"Authorization: Bearer {token}",
                    "--max-examples",
                    EXAMPLES,
                    "--seed",
                    "7",
                    "--no-color",
                ],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
                cwd=tmp_path,
            )
            for who, token in tokens.items()
        }
        events = server.log_events()
    for who, done in runs.items():
        assert done.returncode == 0, f"as {who}:\n{done.stdout[-4000:]}"
    assert all(event["event"] != "unhandled_error" for event in events)

"""CPU per request of the hot routes through the whole application, in process, with the
store's two hot calls stubbed: what the HTTP layer (middleware, routing, reading the token,
parameters and body, building and serialising the reply) costs, apart from the SQL and the
network. A first filter before `bench.py`; it measures the tree it imports, so run it with
`PYTHONPATH=TREE/src` to compare two trees.

    PYTHONPATH=src .venv/bin/python bench/routes.py --requests 2000 --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from typing import Any

import orjson

from mainframe.api.app import create_app
from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import Closed, Job
from mainframe.settings import Settings
from mainframe.store import Completion, ItemOutcome
from mainframe.wiring import build_runtime

PAYLOAD = '{"distributions": ["https://files.example/a-1.0.tar.gz"]}'
LEASED = Job(7, "pkg", "1.0", "scan", "default", PAYLOAD, 1, "a" * 32, 1_780_000_000_000_000)
CLOSED = Closed(7, Status.FINISHED, 1, None, 1_780_000_000_000_000, None, None)
ONE = {"outcome": "finished", "attempt": 1, "assignment_id": "a" * 32, "summary": "clean"}
RESULT = orjson.dumps(ONE | {"result": {"verdict": "clean"}})
BATCH = orjson.dumps({"results": [{"scan_id": 7 + i, **ONE} for i in range(10)]})
HEADERS = [
    (b"host", b"127.0.0.1"),
    (b"content-type", b"application/json"),
    (b"authorization", b"Bearer not-looked-up"),
]
# (name, method, path, query string, body)
REQUESTS = [
    ("poll", "POST", "/api/v1/jobs", b"batch=1", b""),
    ("result?next=1", "POST", "/api/v1/jobs/7/result", b"next=1", RESULT),
    ("results(10)?next=10", "POST", "/api/v1/jobs/results", b"next=10", BATCH),
    ("healthz", "GET", "/healthz", b"", b""),
]


class Leasing:
    async def lease(self, _worker: Any, batch: int) -> list[Job]:
        return [LEASED] * batch


class Results:
    async def complete(self, _worker: Any, items: Any, fetch: int = 0) -> Completion:
        return Completion([ItemOutcome(i, CLOSED, None) for i, _ in items], [LEASED] * fetch)


async def call(app: Any, method: str, path: str, query: bytes, body: bytes) -> None:
    """One request through the ASGI application; it must answer 200."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [*HEADERS, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    status: list[int] = []

    async def receive() -> Any:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    assert status == [200], (path, status)


async def cpu_us(run: Callable[[], Any], requests: int, repeats: int) -> float:
    """The least CPU time per request over `repeats` rounds of `requests`."""
    for _ in range(requests // 10):
        await run()
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        for _ in range(requests):
            await run()
        best = min(best, (time.process_time() - started) / requests * 1e6)
    return best


async def main(requests: int, repeats: int) -> None:
    settings = Settings(database_url=f"sqlite:///{tempfile.mkdtemp()}/bench.db")
    rt = build_runtime(settings)
    rt.ready = True
    object.__setattr__(rt.store, "leasing", Leasing())
    object.__setattr__(rt.store, "results", Results())
    app = create_app(settings, runtime=rt, sweeper=False)
    shown = []
    for name, *request in REQUESTS:
        spent = await cpu_us(lambda r=request: call(app, *r), requests, repeats)
        shown.append(f"{name} {spent:.1f}")
    print("CPU µs a request: " + " | ".join(shown))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.repeats))

"""A fake PyPI (its release JSON API and project pages) and a fake dragonfly-reporter on
loopback, plain HTTP, for the loader's and the bot's routes: releases the test declares, a
switch that makes PyPI fail, and a record of every report the reporter took."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote


class FakeServices:
    """PyPI at `/pypi/...` and `/project/...`, the reporter at `/report/...`, one server."""

    def __init__(self) -> None:
        self.releases: dict[tuple[str, str], dict[str, Any]] = {}
        self.reports: list[tuple[str, dict[str, Any]]] = []
        self.pypi_down = False
        self.lookups: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def release(self, name: str, version: str, *, spelled: str | None = None) -> list[str]:
        """Declare a release (PyPI names it `spelled`, if given); its file URLs."""
        urls = [f"https://files.example/{name}-{version}.tar.gz"]
        info = {"name": spelled or name, "version": version}
        self.releases[name, version] = {"info": info, "urls": [{"url": u} for u in urls]}
        return urls

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(fake: FakeServices) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def _answer(self, status: int, body: object = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            parts = [unquote(p) for p in self.path.split("/") if p]
            with fake._lock:
                fake.lookups.append(self.path)
            if fake.pypi_down:
                self._answer(503, {"message": "down"})
            elif len(parts) == 4 and parts[0] == "pypi" and parts[3] == "json":
                found = fake.releases.get((parts[1], parts[2]))
                self._answer(200 if found else 404, found or {"message": "Not Found"})
            elif len(parts) == 2 and parts[0] == "project":
                known = any(name == parts[1] for name, _ in fake.releases)
                self._answer(301 if known else 404)
            else:
                self._answer(404)

        def do_POST(self) -> None:
            parts = [unquote(p) for p in self.path.split("/") if p]
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if len(parts) == 2 and parts[0] == "report":
                with fake._lock:
                    fake.reports.append((parts[1], body))
                self._answer(200)
            else:
                self._answer(404)

    return Handler


@contextmanager
def fake_services() -> Iterator[FakeServices]:
    fake = FakeServices()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()

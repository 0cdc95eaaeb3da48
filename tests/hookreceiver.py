"""A real HTTPS webhook receiver on loopback for tests: a self-signed CA (trustme) the test
trusts, a scripted answer per request, and a record of every request it got."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

from tests.polling import wait_for


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int = 204
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


class Receiver:
    """Answers each request with the next scripted Answer (the default once they run out)."""

    def __init__(self, *names: str) -> None:
        self.ca = trustme.CA()
        self.cert = self.ca.issue_cert(*(names or ("localhost", "127.0.0.1")))
        self.received: list[Received] = []
        self.script: list[Answer] = []
        self.default = Answer()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.cert.configure_cert(context)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this receiver's CA and nothing else."""
        context = ssl.create_default_context()
        context.load_verify_locations(cadata=self.ca.cert_pem.bytes().decode())
        return context

    def write_ca(self, path: Path) -> Path:
        """The CA certificate as a PEM file (for SSL_CERT_FILE in a server process)."""
        self.ca.cert_pem.write_to_path(str(path))
        return path

    def answer(self, *answers: Answer) -> None:
        with self._lock:
            self.script.extend(answers)

    def next_answer(self, request: Received) -> Answer:
        with self._lock:
            self.received.append(request)
            return self.script.pop(0) if self.script else self.default

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        def enough() -> list[Received] | None:
            with self._lock:
                return list(self.received) if len(self.received) >= count else None

        try:
            return wait_for(enough, timeout=timeout, what=f"{count} requests", every=0.02)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; got {len(self.received)}") from None

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = receiver.next_answer(Received(self.path, headers, body))
            if answer.delay:
                time.sleep(answer.delay)
            self.send_response(answer.status)
            for key, value in answer.headers.items():
                self.send_header(key, value)
            self.send_header("content-length", str(len(answer.body)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@contextmanager
def receiver(*names: str) -> Iterator[Receiver]:
    running = Receiver(*names).start()
    try:
        yield running
    finally:
        running.stop()

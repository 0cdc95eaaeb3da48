"""A TCP relay on loopback that can stop relaying without closing anything: what a stuck
pooler or a partitioned network path looks like from the server. Connections stay open and
the kernel keeps acknowledging, so neither side hears of a failure; new connections are
accepted and hear nothing either."""

from __future__ import annotations

import contextlib
import select
import socket
import threading

POLL_SECONDS = 0.1


class Blackhole:
    """Relays 127.0.0.1:`port` to `target` while `relaying`; `swallow()` stops every byte in
    both directions, `heal()` lets them through again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL_SECONDS)
        self.port: int = self._listener.getsockname()[1]
        self._relaying = threading.Event()
        self._relaying.set()
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def swallow(self) -> None:
        self._relaying.clear()

    def heal(self) -> None:
        self._relaying.set()

    def close(self) -> None:
        self._stopped.set()
        self._relaying.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection(self.target, timeout=5)
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                pump = threading.Thread(target=self._pump, args=(source, sink), daemon=True)
                self._threads.append(pump)
                pump.start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self._stopped.is_set():
            if not self._relaying.wait(POLL_SECONDS):
                continue  # swallowed: read nothing, so nothing reaches the other side
            readable, _, _ = select.select([source], [], [], POLL_SECONDS)
            if not readable:
                continue
            try:
                data = source.recv(65536)
                if data and self._relaying.is_set():
                    sink.sendall(data)
                    continue
                if data:  # read just as the link was swallowed: held, then sent on heal
                    self._relaying.wait()
                    sink.sendall(data)
                    continue
            except OSError:
                pass
            # One side closed: close the other, as a relay does.
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            return

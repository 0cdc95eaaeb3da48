"""The SSRF-safe transport: every request resolves its host again, refuses the target when
any resolved address is refused, and connects only to an address of that same resolution.
TLS SNI, the certificate check and the Host header keep the hostname, because httpcore takes
them from the URL while the pinned network backend alone decides where the socket goes."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import ssl
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Protocol

import certifi
import httpcore
import httpx

from mainframe.hooks.addresses import AddressPolicy
from mainframe.hooks.hosts import BadHost
from mainframe.hooks.targets import ip_literal

DEFAULT_PORTS = {"https": 443, "http": 80}


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to now, in the order to try them."""
        ...


def trust_store() -> ssl.SSLContext:
    """Certificates hooks trust: SSL_CERT_FILE or SSL_CERT_DIR when set, else certifi's."""
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile or None, capath=capath or None)
    return ssl.create_default_context(cafile=certifi.where())


class SystemResolver:
    """The operating system's resolver, off the event loop."""

    async def resolve(self, host: str, port: int) -> list[str]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(str(info[4][0]) for info in infos))


class RefusedAddress(httpx.TransportError):
    """The host resolved (or is) an address a hook may never reach; never retried."""

    def __init__(self, host: str, address: str, reason: str, request: httpx.Request) -> None:
        super().__init__(
            f"{host} resolves to {address}, a refused address ({reason})", request=request
        )
        self.host, self.address, self.reason = host, address, reason


class PinnedNetwork(httpcore.AsyncNetworkBackend):
    """Connects to the already-checked addresses only, whatever host httpcore asks for."""

    def __init__(self, addresses: Sequence[str], inner: httpcore.AsyncNetworkBackend) -> None:
        self.addresses = tuple(addresses)
        self.inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception = httpcore.ConnectError(f"no address for {host}")
        for address in self.addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("hooks never use unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _OnePinnedRequest(httpx.AsyncHTTPTransport):
    # httpx takes no network backend, so its pool is swapped for one that connects through
    # PinnedNetwork and keeps no connection alive (no reuse, across hosts or otherwise).
    def __init__(self, ssl_context: ssl.SSLContext, network: PinnedNetwork) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=1,
            max_keepalive_connections=0,
            network_backend=network,
        )


class _ClosingStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, transport: _OnePinnedRequest) -> None:
        self.inner, self.transport = inner, transport

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            await self.transport.aclose()


class PinnedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that resolves, checks and pins the address of every request."""

    def __init__(
        self,
        *,
        policy: AddressPolicy,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        network: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver or SystemResolver()
        self.ssl_context = ssl_context or trust_store()
        self.network = network or httpcore.AnyIOBackend()

    async def pinned_addresses(self, request: httpx.Request) -> list[str]:
        """The addresses this request may connect to; RefusedAddress if any is refused."""
        host = request.url.host
        port = request.url.port or DEFAULT_PORTS.get(request.url.scheme, 443)
        try:
            literal = ip_literal(host)
        except BadHost as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        try:
            found = [str(literal)] if literal else await self.resolver.resolve(host, port)
        except OSError as exc:
            raise httpx.ConnectError(f"cannot resolve {host}: {exc}", request=request) from exc
        if not found:
            raise httpx.ConnectError(f"{host} has no address", request=request)
        for address in found:
            reason = self.policy.refusal(ipaddress.ip_address(address.split("%", 1)[0]))
            if reason is not None:
                raise RefusedAddress(host, address, reason, request)
        return found

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        addresses = await self.pinned_addresses(request)
        one = _OnePinnedRequest(self.ssl_context, PinnedNetwork(addresses, self.network))
        try:
            response = await one.handle_async_request(request)
        except BaseException:
            await one.aclose()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_ClosingStream(response.stream, one),
            extensions=response.extensions,
        )

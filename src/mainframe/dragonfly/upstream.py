"""The two services the loader's and the bot's routes call: PyPI's JSON API (a release's
name, version and files; whether a project exists) and dragonfly-reporter (a report handed
on). Each call has the configured timeout and a bounded reply; a service that is down, slow
or answers nonsense is an Unavailable (503 with Retry-After), never a 500. A client is made
per request: the loader calls once a minute and the bot now and then."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import orjson
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticError

from mainframe.contract.limits import MAX_ARTIFACT
from mainframe.contract.schemas import PackageName, PackageVersion
from mainframe.dragonfly.jobs import is_download_url
from mainframe.store import Unavailable

# PyPI's reply for one release is a few hundred kilobytes at most; past this it is refused.
MAX_REPLY_BYTES = 8 * 1024 * 1024
# Releases looked up at once per batch.
CONCURRENCY = 8
# A release's file URLs kept at most (the largest releases have a few hundred files).
MAX_FILES = 1000
_NAME: TypeAdapter[str] = TypeAdapter(PackageName)
_VERSION: TypeAdapter[str] = TypeAdapter(PackageVersion)
RETRY_AFTER_SECONDS = 30


@dataclass(frozen=True, slots=True)
class Release:
    """A release as PyPI names it, with the URLs of its files."""

    name: str
    version: str
    urls: list[str]


def _down(service: str, detail: str) -> Unavailable:
    return Unavailable(
        f"{service}_unavailable", f"{service}: {detail}", retry_after=RETRY_AFTER_SECONDS
    )


class Services:
    """PyPI at `pypi_url` and the reporter at `reporter_url` (None: reports are refused)."""

    def __init__(
        self,
        pypi_url: str,
        reporter_url: str | None,
        *,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.pypi_url = pypi_url
        self.reporter_url = reporter_url
        self.timeout = timeout
        self._transport = transport

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=self.timeout, follow_redirects=False, transport=self._transport
        )

    async def releases(
        self, pairs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], Release | None]:
        """Each pair's release, or None where PyPI knows no such release; Unavailable if PyPI
        fails any of them (so a batch is queued whole or not at all)."""
        gate = asyncio.Semaphore(CONCURRENCY)
        async with self._client() as client:

            async def one(pair: tuple[str, str]) -> Release | None:
                async with gate:
                    return await self._release(client, *pair)

            found = await asyncio.gather(*(one(pair) for pair in pairs))
        return dict(zip(pairs, found, strict=True))

    async def release(self, name: str, version: str) -> Release | None:
        async with self._client() as client:
            return await self._release(client, name, version)

    async def _release(self, client: httpx.AsyncClient, name: str, version: str) -> Release | None:
        url = f"{self.pypi_url}/pypi/{quote(name, safe='')}/{quote(version, safe='')}/json"
        status, body = await _get(client, url, "pypi")
        if status == 404:
            return None
        if status != 200:
            raise _down("pypi", f"GET {url} answered {status}")
        return _parsed_release(body, url)

    async def project_exists(self, name: str) -> bool:
        """Whether PyPI has a project page for the name (a redirect to its normal name
        counts: it exists)."""
        url = f"{self.pypi_url}/project/{quote(name, safe='')}"
        async with self._client() as client:
            status, _ = await _get(client, url, "pypi", read=False)
        if status == 404:
            return False
        if status >= 400:
            raise _down("pypi", f"GET {url} answered {status}")
        return True

    async def report(self, name: str, body: dict[str, Any]) -> None:
        """Hand a report to the reporter; Unavailable unless it took it (a 2xx)."""
        if self.reporter_url is None:
            raise Unavailable(
                "reporter_unavailable",
                "no reporter is configured: set MAINFRAME_DRAGONFLY_REPORTER_URL",
                retry_after=RETRY_AFTER_SECONDS,
            )
        url = f"{self.reporter_url}/report/{quote(name, safe='')}"
        try:
            async with self._client() as client:
                response = await client.post(url, content=orjson.dumps(body), headers=_JSON)
        except httpx.HTTPError as exc:
            raise _down("reporter", f"POST {url} failed: {type(exc).__name__}") from None
        if not 200 <= response.status_code < 300:
            raise _down("reporter", f"POST {url} answered {response.status_code}")


_JSON = {"content-type": "application/json"}


async def _get(
    client: httpx.AsyncClient, url: str, service: str, *, read: bool = True
) -> tuple[int, bytes]:
    """The status and (bounded) body of a GET; Unavailable when it cannot be had."""
    try:
        async with client.stream("GET", url) as reply:
            if reply.status_code != 200 or not read:
                return reply.status_code, b""
            return 200, await _bounded(reply, url, service)
    except httpx.HTTPError as exc:
        raise _down(service, f"GET {url} failed: {type(exc).__name__}") from None


async def _bounded(reply: httpx.Response, url: str, service: str) -> bytes:
    declared = reply.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
        raise _down(service, f"GET {url} answered more than {MAX_REPLY_BYTES} bytes")
    chunks: list[bytes] = []
    seen = 0
    async for chunk in reply.aiter_bytes():
        seen += len(chunk)
        if seen > MAX_REPLY_BYTES:
            raise _down(service, f"GET {url} answered more than {MAX_REPLY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parsed_release(body: bytes, url: str) -> Release:
    """PyPI's release JSON as a Release: `info.name`, `info.version` and every `urls[].url`
    that is a download URL a worker can use."""
    try:
        value: Any = orjson.loads(body)
        info = value["info"]
        name, version = (
            _NAME.validate_python(info["name"]),
            _VERSION.validate_python(info["version"]),
        )
        files = value["urls"]
        if not isinstance(files, list):
            raise TypeError
        urls = [
            f["url"] for f in files[:MAX_FILES] if isinstance(f, dict) and _usable(f.get("url"))
        ]
    except (orjson.JSONDecodeError, KeyError, TypeError, PydanticError):
        raise _down("pypi", f"GET {url} answered something that is not a release") from None
    return Release(name, version, urls)


def _usable(url: object) -> bool:
    """A file URL a worker can download, within the bound of what a scan stores."""
    return is_download_url(url) and isinstance(url, str) and len(url) <= MAX_ARTIFACT

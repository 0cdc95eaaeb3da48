"""What a dragonfly worker's job poll needs of its own: the distributions rule. The worker
downloads every entry of `distributions` and ends on one it cannot parse as an absolute
http(s) URL with a host, so a scan's `payload.distributions` is passed on only when every
entry is one; otherwise the job carries none (`replies.py::job`)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

import orjson

# A host name a URL parser accepts as it is (labels of letters, digits, '-' and '_'); an IPv6
# literal is checked by `ipaddress`.
_HOST = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?$")
# Space and control characters: a URL with one is taken for garbage, not repaired.
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def is_download_url(text: object) -> bool:
    """An absolute http(s) URL with a host (and a port, if any, in range)."""
    if not isinstance(text, str) or _CONTROL.search(text):
        return False
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 (a port out of range or not a number raises here)
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return False
    return _is_host(parts.hostname)


def _is_host(host: str) -> bool:
    if "%" in host:  # an IPv6 zone: URL parsers refuse it
        return False
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    return bool(_HOST.match(host))


def distributions(payload: str | None) -> list[str]:
    """The scan payload's `distributions` when it is a list of download URLs, else []."""
    if payload is None:
        return []
    value: Any = orjson.loads(payload)
    found = value.get("distributions") if isinstance(value, dict) else None
    if isinstance(found, list) and all(is_download_url(url) for url in found):
        return list(found)
    return []

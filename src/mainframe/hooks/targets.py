"""Whether a hook URL could ever be delivered to, judged from the URL alone (the API's 422).
Host names are judged again, on every attempt, by the transport once they resolve."""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from mainframe.hooks.addresses import AddressPolicy, IPAddress

MAX_URL_LENGTH = 2048
# Hosts getaddrinfo would read as a numeric IPv4 address ("127.1", "0x7f000001", "2130706433").
_NUMERIC_HOST = re.compile(r"^[0-9a-fA-FxX.]+$")


def ip_literal(host: str) -> IPAddress | None:
    """The address a URL host names literally, in any form the resolver would accept."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    if _NUMERIC_HOST.match(host) and not host.endswith("."):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def url_problem(url: str, *, allow_http: bool, policy: AddressPolicy) -> str | None:
    """Why `url` can never be delivered to, or None when it may be."""
    if len(url) > MAX_URL_LENGTH:
        return f"at most {MAX_URL_LENGTH} characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a URL: {exc}"
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes:
        return "must be an https:// URL" + ("" if allow_http else " (plain http is not enabled)")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "must not carry credentials"
    host = parts.hostname
    if not host:
        return "must name a host"
    if port == 0:
        return "port 0 cannot be connected to"
    literal = ip_literal(host)
    if literal is not None:
        reason = policy.refusal(literal)
        if reason is not None:
            return f"{literal} is a refused address ({reason})"
    return None

"""Whether a hook URL could ever be delivered to, judged from the URL alone (the API's 422).
Host names are judged again, on every attempt, by the transport once they resolve."""

from __future__ import annotations

from urllib.parse import urlsplit

from mainframe.contract.limits import MAX_URL_LENGTH
from mainframe.hooks import hosts
from mainframe.hooks.addresses import AddressPolicy, IPAddress


def ip_literal(host: str) -> IPAddress | None:
    """The address a URL host names literally, in any spelling a WHATWG parser accepts;
    BadHost when the standard refuses the host outright."""
    return hosts.address_of(host)


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
    try:
        literal = ip_literal(host)
    except hosts.BadHost as exc:
        return f"not a valid host: {exc}"
    if literal is not None:
        reason = policy.refusal(literal)
        if reason is not None:
            return f"{literal} is a refused address ({reason})"
    return None

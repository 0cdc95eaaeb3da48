"""A URL's host as the WHATWG URL standard reads it (browsers, curl, and the resolvers they
feed): percent-decoded, mapped and lowercased by IDNA (UTS 46), and, when its last label is a
number, an IPv4 address in any of its spellings: `169.254.169.254.`, `0xA9.0xFE.0xA9.0xFE`,
`2852039166`, `0251.0376.0251.0376`. Every address check reads the host this way, so no
spelling of a refused address passes for a name."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import unquote

import idna

from mainframe.hooks.addresses import IPAddress

_HEX = re.compile(r"0[xX][0-9a-fA-F]*")
_OCTAL = re.compile(r"0[0-7]+")


class BadHost(ValueError):
    """A host the standard refuses, such as a number-ended host that is no IPv4 address."""


def _number(part: str) -> int | None:
    """One part of a numeric IPv4 host: hexadecimal after 0x, octal after a 0, or decimal."""
    if _HEX.fullmatch(part):
        return int(part[2:] or "0", 16)
    if _OCTAL.fullmatch(part):
        return int(part, 8)
    return int(part) if part.isascii() and part.isdigit() else None


def _ends_in_a_number(labels: list[str]) -> bool:
    last = labels[-1]
    return bool(last) and ((last.isascii() and last.isdigit()) or bool(_HEX.fullmatch(last)))


def ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a (normalised) host names, None for a domain; BadHost when the host
    ends in a number but is no address, which the standard refuses as a host at all."""
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()
    if not _ends_in_a_number(labels):
        return None
    numbers = [_number(label) for label in labels]
    if len(labels) > 4 or any(n is None for n in numbers):
        raise BadHost(f"{host!r} ends in a number but is not an IPv4 address")
    parts = [n for n in numbers if n is not None]
    if any(n > 255 for n in parts[:-1]) or parts[-1] >= 256 ** (5 - len(parts)):
        raise BadHost(f"{host!r} is out of the IPv4 range")
    value = parts[-1] + sum(n << (8 * (3 - i)) for i, n in enumerate(parts[:-1]))
    return ipaddress.IPv4Address(value)


def normalized(host: str) -> str:
    """The host as the standard writes it back: an IPv6 literal compressed, an IPv4 address
    dotted decimal, a domain in lowercase ASCII (IDNA)."""
    try:
        return ipaddress.IPv6Address(host.strip("[]").split("%", 1)[0]).compressed
    except ValueError:
        pass
    decoded = unquote(host)
    try:
        domain = idna.encode(decoded, uts46=True).decode("ascii")
    except idna.IDNAError:
        domain = decoded.lower()
    found = ipv4(domain)
    return domain if found is None else str(found)


def address_of(host: str) -> IPAddress | None:
    """The address a host names literally in any spelling, or None for a domain name."""
    text = normalized(host)
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None

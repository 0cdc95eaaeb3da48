"""Which IP addresses a hook may never reach: every range that is not plain public unicast,
and every IPv6 form that embeds such an IPv4 address. Pure; the transport asks it on each
attempt and the API asks it for IP-literal URLs."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# (reason, range), first match wins, so the cloud metadata addresses come before the ranges
# that hold them. IPv4 from the IANA special-purpose registry (RFC 6890 and its updates).
REFUSED_V4: tuple[tuple[str, str], ...] = (
    ("cloud_metadata", "169.254.169.254/32"),  # AWS, GCP, Azure, OCI, DigitalOcean…
    ("cloud_metadata", "169.254.170.2/32"),  # AWS ECS task metadata
    ("cloud_metadata", "100.100.100.200/32"),  # Alibaba Cloud
    ("cloud_metadata", "168.63.129.16/32"),  # Azure WireServer: a public address, not a peer
    ("unspecified", "0.0.0.0/8"),  # "this network" (RFC 791); 0.0.0.0 reaches the host itself
    ("private", "10.0.0.0/8"),  # RFC 1918
    ("cgnat", "100.64.0.0/10"),  # shared address space (RFC 6598)
    ("loopback", "127.0.0.0/8"),
    ("link_local", "169.254.0.0/16"),  # RFC 3927
    ("private", "172.16.0.0/12"),  # RFC 1918
    ("reserved", "192.0.0.0/24"),  # IETF protocol assignments (RFC 6890)
    ("documentation", "192.0.2.0/24"),  # TEST-NET-1 (RFC 5737)
    ("reserved", "192.88.99.0/24"),  # deprecated 6to4 relay anycast (RFC 7526)
    ("private", "192.168.0.0/16"),  # RFC 1918
    ("benchmark", "198.18.0.0/15"),  # RFC 2544
    ("documentation", "198.51.100.0/24"),  # TEST-NET-2
    ("documentation", "203.0.113.0/24"),  # TEST-NET-3
    ("multicast", "224.0.0.0/4"),
    ("reserved", "240.0.0.0/4"),  # future use, and 255.255.255.255 broadcast
)

# IPv6 from the IANA IPv6 special-purpose registry. The embedded-IPv4 forms (mapped,
# compatible, NAT64, 6to4) are judged by the address they embed, before this table.
REFUSED_V6: tuple[tuple[str, str], ...] = (
    ("unspecified", "::/128"),
    ("loopback", "::1/128"),
    ("reserved", "64:ff9b:1::/48"),  # local-use NAT64 (RFC 8215): translates to anything
    ("reserved", "100::/64"),  # discard-only (RFC 6666)
    ("benchmark", "2001:2::/48"),  # RFC 5180
    ("documentation", "2001:db8::/32"),  # RFC 3849
    ("reserved", "2001::/23"),  # IETF protocol assignments, Teredo included (RFC 4380)
    ("documentation", "3fff::/20"),  # RFC 9637
    ("reserved", "5f00::/16"),  # SRv6 SIDs (RFC 9602)
    ("cloud_metadata", "fd00:ec2::254/128"),  # AWS metadata over IPv6
    ("unique_local", "fc00::/7"),  # RFC 4193
    ("link_local", "fe80::/10"),
    ("reserved", "fec0::/10"),  # deprecated site-local (RFC 3879)
    ("multicast", "ff00::/8"),
)

# Only global unicast (RFC 4291) is public; everything else in IPv6 is reserved.
GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix
COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated IPv4-compatible (RFC 4291)


def _table(rows: tuple[tuple[str, str], ...]) -> tuple[tuple[str, IPNetwork], ...]:
    return tuple((reason, ipaddress.ip_network(cidr)) for reason, cidr in rows)


_V4 = _table(REFUSED_V4)
_V6 = _table(REFUSED_V6)


def embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, -compatible, NAT64 or 6to4 address stands for."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64 or (address in COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: IPAddress) -> str | None:
    """Why a hook must not connect to `address` (a reason name), or None when it is public."""
    if isinstance(address, ipaddress.IPv4Address):
        return _first(address, _V4) or (None if address.is_global else "reserved")
    inner = embedded_v4(address)
    if inner is not None:
        reason = refusal(inner)
        return None if reason is None else f"embedded_{reason}"
    found = _first(address, _V6)
    if found is not None:
        return found
    return None if address in GLOBAL_UNICAST_V6 else "reserved"


def _first(address: IPAddress, table: tuple[tuple[str, IPNetwork], ...]) -> str | None:
    for reason, network in table:
        if address.version == network.version and address in network:
            return reason
    return None


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """The refused ranges minus an explicit allow-list (development and tests only)."""

    allowed: tuple[IPNetwork, ...] = ()

    def refusal(self, address: IPAddress) -> str | None:
        """None when the address may be connected to, else the reason it may not."""
        if any(address.version == n.version and address in n for n in self.allowed):
            return None
        return refusal(address)

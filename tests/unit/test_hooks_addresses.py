"""Address classification and URL checks: every refused range, every embedded-IPv4 form,
and the allow-list exemption. Pure: nothing here opens a socket."""

from __future__ import annotations

import ipaddress
import re

import pytest

from mainframe.hooks.addresses import (
    REFUSED_V4,
    REFUSED_V6,
    AddressPolicy,
    embedded_v4,
    refusal,
)
from mainframe.hooks.targets import ip_literal, url_problem
from mainframe.parsers import parse_cidrs

# One address inside each refused class docs/hooks.md names, with the reason reported.
REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("169.254.1.1", "link_local"),
    ("100.64.0.1", "cgnat"),
    ("100.127.255.254", "cgnat"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.0.0.8", "reserved"),
    ("192.88.99.1", "reserved"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("198.18.0.1", "benchmark"),
    ("198.19.255.254", "benchmark"),
    ("169.254.169.254", "cloud_metadata"),
    ("169.254.170.2", "cloud_metadata"),
    ("100.100.100.200", "cloud_metadata"),
    ("168.63.129.16", "cloud_metadata"),
    ("fd00:ec2::254", "cloud_metadata"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link_local"),
    ("fc00::1", "unique_local"),
    ("fd12:3456::1", "unique_local"),
    ("ff02::1", "multicast"),
    ("fec0::1", "reserved"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("2001:2::1", "benchmark"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"),  # Teredo
    ("100::1", "reserved"),  # discard-only
    ("64:ff9b:1::a00:1", "reserved"),  # local-use NAT64
    ("5f00::1", "reserved"),
    ("4000::1", "reserved"),  # outside global unicast
    # IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms of refused IPv4 addresses.
    ("::ffff:127.0.0.1", "embedded_loopback"),
    ("::ffff:10.0.0.1", "embedded_private"),
    ("::ffff:169.254.169.254", "embedded_cloud_metadata"),
    ("::127.0.0.1", "embedded_loopback"),
    ("::a9fe:a9fe", "embedded_cloud_metadata"),
    ("64:ff9b::a9fe:a9fe", "embedded_cloud_metadata"),
    ("64:ff9b::7f00:1", "embedded_loopback"),
    ("64:ff9b::c0a8:101", "embedded_private"),
    ("2002:7f00:1::", "embedded_loopback"),
    ("2002:a9fe:a9fe::1", "embedded_cloud_metadata"),
    ("2002:c0a8:101::", "embedded_private"),
]


@pytest.mark.parametrize(("address", "reason"), REFUSED, ids=[a for a, _ in REFUSED])
def test_every_refused_range_is_refused_with_its_reason(address: str, reason: str) -> None:
    assert refusal(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.215.14",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ],
)
def test_public_addresses_and_their_embedded_forms_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


def test_every_table_row_refuses_its_own_first_address() -> None:
    # Guards the tables themselves: no row is shadowed into acceptance by a typo.
    for _, cidr in REFUSED_V4 + REFUSED_V6:
        network = ipaddress.ip_network(cidr)
        assert refusal(network.network_address) is not None, cidr


def test_embedded_forms_are_unwrapped() -> None:
    v6 = ipaddress.IPv6Address
    assert embedded_v4(v6("::ffff:1.2.3.4")) == ipaddress.IPv4Address("1.2.3.4")
    assert embedded_v4(v6("64:ff9b::102:304")) == ipaddress.IPv4Address("1.2.3.4")
    assert embedded_v4(v6("2002:102:304::")) == ipaddress.IPv4Address("1.2.3.4")
    assert embedded_v4(v6("::102:304")) == ipaddress.IPv4Address("1.2.3.4")
    assert embedded_v4(v6("::1")) is None
    assert embedded_v4(v6("2606:4700::1")) is None


def test_allow_list_exempts_only_its_ranges() -> None:
    policy = AddressPolicy(parse_cidrs("127.0.0.0/8, ::1"))
    assert policy.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert policy.refusal(ipaddress.ip_address("::1")) is None
    assert policy.refusal(ipaddress.ip_address("10.0.0.1")) == "private"
    assert policy.refusal(ipaddress.ip_address("169.254.169.254")) == "cloud_metadata"


def test_bad_cidr_is_named() -> None:
    with pytest.raises(ValueError, match=re.escape("'10.0.0.0/33'")):
        parse_cidrs("127.0.0.0/8,10.0.0.0/33")


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("hooks.example.com", None),
        ("deadbeef.com", None),
        # The WHATWG URL standard's spellings, as browsers and curl read them.
        ("169.254.169.254.", "169.254.169.254"),
        ("0xA9.0xFE.0xA9.0xFE", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("2852039166", "169.254.169.254"),
        ("0x7f.1", "127.0.0.1"),
        ("%31%32%37.0.0.1", "127.0.0.1"),
        ("\uff11\uff12\uff17\u3002\uff10\u3002\uff10\u3002\uff11", "127.0.0.1"),
        ("LOCALHOST.example.", None),
        ("0xdeadbeef", "222.173.190.239"),
    ],
)
def test_ip_literals_in_every_spelling_the_resolver_accepts(host: str, address: str | None) -> None:
    found = ip_literal(host)
    assert (None if found is None else str(found)) == address


STRICT = AddressPolicy()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://hooks.example.com/x", "https"),
        ("ftp://hooks.example.com/x", "https"),
        ("https://user:pw@hooks.example.com/x", "credentials"),
        ("https://user@hooks.example.com/x", "credentials"),
        ("https:///nohost", "host"),
        ("https://127.0.0.1/x", "loopback"),
        ("https://[::ffff:127.0.0.1]/x", "embedded_loopback"),
        ("https://[64:ff9b::a9fe:a9fe]/", "embedded_cloud_metadata"),
        ("https://169.254.169.254/latest/meta-data", "cloud_metadata"),
        ("https://2130706433/", "loopback"),
        ("https://169.254.169.254./latest/meta-data", "cloud_metadata"),
        ("https://0xa9fea9fe/", "cloud_metadata"),
        ("https://127.0.0.1.:8443/", "loopback"),
        ("https://1.2.3.4.5/", "not a valid host"),
        ("https://256.1.1.1/", "not a valid host"),
        ("https://10.0.0.1:8443/", "private"),
        ("https://hooks.example.com:99999/", "not a URL"),
        ("https://hooks.example.com/" + "a" * 3000, "2048"),
    ],
)
def test_undeliverable_urls_are_named(url: str, problem: str) -> None:
    found = url_problem(url, allow_http=False, policy=STRICT)
    assert found is not None and problem in found


def test_deliverable_urls_pass() -> None:
    assert url_problem("https://hooks.example.com/in?x=1", allow_http=False, policy=STRICT) is None
    assert url_problem("https://8.8.8.8/", allow_http=False, policy=STRICT) is None
    assert url_problem("http://hooks.example.com/", allow_http=True, policy=STRICT) is None
    dev = AddressPolicy(parse_cidrs("127.0.0.0/8"))
    assert url_problem("https://127.0.0.1:8443/", allow_http=False, policy=dev) is None

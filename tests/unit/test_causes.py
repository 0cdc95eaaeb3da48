"""Failure summaries grouped into causes as a person would group them, without a database:
real failures' last lines (Python tracebacks, YARA, pip and HTTP errors, timeouts, OOM kills,
connection errors), each group one cause whatever varies, and pairs that must stay apart."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.lifecycle.causes import (
    GROUPING_VERSION,
    MAX_PATTERN,
    NO_SUMMARY,
    cause_of,
    key_of,
    meaningful_line,
    named,
)
from mainframe.lifecycle.rules import AttemptOutcome

# Each group: summaries of one failure, whatever varies between them, and the pattern shown.
GROUPS: dict[str, tuple[str, list[str]]] = {
    "reshape": (
        "ValueError: cannot reshape array of size <n> into shape (<n>,)",
        [
            "ValueError: cannot reshape array of size 123456 into shape (123456,)",
            "ValueError: cannot reshape array of size 98765 into shape (98765,)",
            'Traceback (most recent call last):\n  File "scan.py", line 88, in features\n'
            "ValueError: cannot reshape array of size 7 into shape (7,)",
        ],
    ),
    "killed": (
        "scanner killed after <duration>",
        [
            "scanner killed after 150000 ms",
            "scanner killed after 900 ms",
            "scanner killed after 150ms",
            "scanner killed after 1.5s",
            "scanner killed after 2m30s",
        ],
    ),
    "yara timeout": (
        "YARA scan timed out after <duration> on <path>",
        [
            "YARA scan timed out after 10 s on scratch/x1/pkg-1.2.tar.gz",
            "YARA scan timed out after 12 s on scratch/y7/other-3.4.5.whl",
            "YARA scan timed out after 300 seconds on /srv/scratch/big-10.0.0-py3-none-any.whl",
        ],
    ),
    "offset": (
        "yara.Error: could not map file at offset <hex>",
        [
            "yara.Error: could not map file at offset 0x1f3a",
            "yara.Error: could not map file at offset 0x7ffd3a2b1c40",
            "yara.Error: could not map file at offset 0XFF",
        ],
    ),
    "yara syntax": (
        "yara.SyntaxError: <path>(<n>): undefined identifier <quoted>",
        [
            'yara.SyntaxError: rules/malware.yar(12): undefined identifier "pe"',
            'yara.SyntaxError: rules/packers/upx.yar(345): undefined identifier "math"',
        ],
    ),
    "connect ipv6": (
        "dial tcp <address>: connect: connection refused",
        [
            "dial tcp [::1]:8080: connect: connection refused",
            "dial tcp [2001:db8::ff00:42:8329]:443: connect: connection refused",
            "dial tcp [fe80::1%eth0]:5432: connect: connection refused",
            "dial tcp 10.0.0.5:5432: connect: connection refused",
        ],
    ),
    "bare ipv6": (
        "no route to <address>",
        ["no route to fe80::1%eth0", "no route to 2001:db8::ff00:42:8329", "no route to ::1"],
    ),
    "connect call": (
        "OSError: [Errno <n>] Connect call failed (<quoted>, <n>, <n>, <n>)",
        [
            "OSError: [Errno 111] Connect call failed ('::1', 8080, 0, 0)",
            "OSError: [Errno 111] Connect call failed ('2001:db8::1', 443, 0, 0)",
        ],
    ),
    "host": (
        "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host <host> "
        "ssl:default [Connection reset by peer]",
        [
            "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host pypi.org:443 "
            "ssl:default [Connection reset by peer]",
            "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host "
            "files.pythonhosted.org:443 ssl:default [Connection reset by peer]",
        ],
    ),
    "dns": (
        "dial tcp: lookup <host> on <address>: no such host",
        [
            "dial tcp: lookup pypi.org on 127.0.0.53:53: no such host",
            "dial tcp: lookup files.pythonhosted.org on [fe80::1%eth0]:53: no such host",
            "dial tcp: lookup mirror.internal on 10.0.0.2:53: no such host",
        ],
    ),
    "pool": (
        "urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host=<quoted>, port=<n>): Max "
        "retries exceeded with url: <path> (Caused by NewConnectionError(<quoted>))",
        [
            "urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host='pypi.org', port=443): "
            "Max retries exceeded with url: /simple/left-pad/ (Caused by NewConnectionError("
            "'<urllib3.connection.HTTPSConnection object at 0x7f3b2c1d0e80>: Failed to "
            "establish a new connection: [Errno 111] Connection refused'))",
            "urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host='files.pythonhosted.org',"
            " port=443): Max retries exceeded with url: /packages/ab/cd/x-1.0.tar.gz (Caused by "
            "NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f00aa>: "
            "Failed to establish a new connection: [Errno 113] No route to host'))",
        ],
    ),
    "timestamps": (
        "<date> scan aborted: rules reloaded",
        [
            "2026-09-27T10:14:00Z scan aborted: rules reloaded",
            "2026-09-28T23:59:59.999999+00:00 scan aborted: rules reloaded",
            "2026-09-27 10:14:00.123+02:00 scan aborted: rules reloaded",
            "2026-09-27 10:14:00,123 scan aborted: rules reloaded",
            "Sep 27 10:14:00 scan aborted: rules reloaded",
            "Sun, 27 Sep 2026 10:14:00 GMT scan aborted: rules reloaded",
        ],
    ),
    "clock": (
        "lease checked at <time>, too late",
        ["lease checked at 10:14:00 UTC, too late", "lease checked at 23:01:59.5 UTC, too late"],
    ),
    "digest": (
        "hash mismatch for wheel: expected sha256:<hex>, got sha256:<hex>",
        [
            "hash mismatch for wheel: expected sha256:"
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, got sha256:"
            "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
            "hash mismatch for wheel: expected sha256:"
            "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9, got sha256:"
            "BAA5A0964D3320FBC0C6A922140453C8513EA24AB8FD0577034804A967248096",
        ],
    ),
    "rules commit": (
        "scanner <version> failed: rules commit <hex>",
        [
            "scanner v2.3.1 failed: rules commit 9f8e7d6",
            "scanner 2.4.0-rc1 failed: rules commit 0123456789abcdef0123456789abcdef01234567",
            "scanner 10.0.0.post1 failed: rules commit 1a2b3c4d",
        ],
    ),
    "worker crash": (
        "worker <uuid> crashed at <hex>",
        [
            "worker 5b1c8d2e-1f2a-4b3c-9d8e-7f6a5b4c3d2e crashed at 0x7ffd3a2b1c40",
            "worker 0B1C8D2E-1F2A-4B3C-9D8E-7F6A5B4C3D2F crashed at 0x7ffd3a2b1c99",
        ],
    ),
    "oom": (
        "Out of memory: Killed process <n> (yara) total-vm:<size>, anon-rss:<size>, "
        "file-rss:<size>",
        [
            "Out of memory: Killed process 12345 (yara) total-vm:123456kB, anon-rss:98765kB, "
            "file-rss:0kB",
            "Out of memory: Killed process 7 (yara) total-vm:4194304kB, anon-rss:3900000kB, "
            "file-rss:512kB",
        ],
    ),
    "allocate": (
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate <size> for an array "
        "with shape (<n>, <n>) and data type float64",
        [
            "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 7.45 GiB for an array "
            "with shape (1000000, 1000) and data type float64",
            "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 512 MiB for an array "
            "with shape (8192, 8192) and data type float64",
        ],
    ),
    "http status": (
        "requests.exceptions.HTTPError: <n> Server Error: Service Unavailable for url: <url>",
        [
            "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
            "https://pypi.org/pypi/left-pad/json",
            "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
            "https://pypi.org/pypi/numpy/1.26.4/json",
        ],
    ),
    "pip resolve": (
        "ERROR: Could not find a version that satisfies the requirement "
        "numpy==<version> (from versions: none)",
        [
            "ERROR: Could not find a version that satisfies the requirement numpy==1.26.4 "
            "(from versions: none)",
            "ERROR: Could not find a version that satisfies the requirement numpy==2.0.0rc1 "
            "(from versions: none)",
        ],
    ),
    "pip download": (
        "ERROR: HTTP error <n> while getting <url>",
        [
            "ERROR: HTTP error 404 while getting https://files.pythonhosted.org/packages/ab/cd/"
            "pkg-1.0.tar.gz",
            "ERROR: HTTP error 404 while getting https://files.pythonhosted.org/packages/0f/9e/"
            "other-2.3.1-py3-none-any.whl",
        ],
    ),
    "client timeout": (
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers) after "
        "<duration>",
        [
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers) after 30s",
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers) after "
            "1m0.001s",
        ],
    ),
    "decode": (
        "UnicodeDecodeError: <quoted> codec can't decode byte <hex> in position <n>: invalid "
        "start byte",
        [
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x8b in position 1: invalid "
            "start byte",
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 12345: invalid "
            "start byte",
        ],
    ),
    "json": (
        "json.decoder.JSONDecodeError: Expecting value: line <n> column <n> (char <n>)",
        [
            "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
            "json.decoder.JSONDecodeError: Expecting value: line 310 column 17 (char 123456789)",
        ],
    ),
    "disk": (
        "OSError: [Errno <n>] No space left on device: <quoted>",
        [
            "OSError: [Errno 28] No space left on device: '/var/tmp/scan-3f2a9c1b/extract'",
            "OSError: [Errno 28] No space left on device: '/var/tmp/scan-77aa11ee/deep/f.py'",
        ],
    ),
    "tls": (
        "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
        "failed: unable to get local issuer certificate (_ssl.c:<n>)",
        [
            "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
            "failed: unable to get local issuer certificate (_ssl.c:1006)",
            "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
            "failed: unable to get local issuer certificate (_ssl.c:992)",
        ],
    ),
    "mail": (
        "notify failed: <<email>>: Recipient address rejected",
        [
            "notify failed: <alice@example.com>: Recipient address rejected",
            "notify failed: <ops+scans@mail.example.org>: Recipient address rejected",
        ],
    ),
    "key": ("KeyError: <quoted>", ["KeyError: 'distributions'", "KeyError: 'urls'"]),
    "int literal": (
        "ValueError: invalid literal for int() with base <n>: <quoted>",
        [
            "ValueError: invalid literal for int() with base 10: 'abc'",
            "ValueError: invalid literal for int() with base 10: 'x y'\n",
            '  ValueError: invalid literal for int() with base 16: "0x"  ',
        ],
    ),
    "windows": (
        "cannot open <path>: access denied",
        [
            r"cannot open C:\scans\a\pkg.whl: access denied",
            r"cannot open \\nas\share\x: access denied",
        ],
    ),
}
# Pairs a person keeps apart: the words that differ name the failure, not its data.
APART = [
    (
        "ValueError: Buffer dtype mismatch, expected 'float64' but got 'float32'",
        "ValueError: Buffer dtype mismatch, expected 'float32' but got 'float64'",
    ),
    ("TypeError: cannot cast float64 to int64", "TypeError: cannot cast float32 to int64"),
    ("unsupported digest algorithm sha256", "unsupported digest algorithm md5"),
    ("expected sha256:9f86d081884c7d65, got none", "expected md5:9f86d081884c7d65, got none"),
    ("no wheel for manylinux2014_x86_64", "no wheel for manylinux2014_aarch64"),
    ("no wheel for x86_64", "no wheel for aarch64"),
    ("package has no py3 wheel", "package has no py2 wheel"),
    ("cannot decode as utf8", "cannot decode as utf16"),
    ("upstream closed the http2 stream", "upstream closed the http1 stream"),
    ("ValueError: bad header", "TypeError: bad header"),
    (
        "ConnectionRefusedError: [Errno 111] Connection refused",
        "TimeoutError: [Errno 110] Connection timed out",
    ),
    ("worker exited with signal 11 (SIGSEGV)", "worker exited with signal 9 (SIGKILL)"),
    ("YARA scan timed out after 10 s on a/b/c", "YARA scan failed after 10 s on a/b/c"),
    ("YARA scan timed out after 10 s", "YARA scan timed out after 10 s (rules not loaded)"),
    (
        "cannot write /var/tmp/x (No space left on device)",
        "cannot read /var/tmp/x (Permission denied)",
    ),
    ("OSError: [Errno 5] Input/output error", "OSError: [Errno 5] read/write error"),
]


def test_the_table_holds_forty_real_summaries() -> None:
    assert sum(len(summaries) for _, summaries in GROUPS.values()) >= 40


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_one_failure_with_different_details_is_one_cause(group: str) -> None:
    pattern, summaries = GROUPS[group]
    causes = {cause_of("failed", summary) for summary in summaries}
    assert {c.pattern for c in causes} == {pattern}
    assert len(causes) == 1


def test_the_groups_are_apart() -> None:
    keys = {cause_of("failed", summaries[0]).key for _, summaries in GROUPS.values()}
    assert len(keys) == len(GROUPS)


@pytest.mark.parametrize(("one", "other"), APART)
def test_failures_a_person_tells_apart_are_two_causes(one: str, other: str) -> None:
    assert cause_of("failed", one).key != cause_of("failed", other).key


def test_words_that_mix_letters_and_digits_stay_as_written() -> None:
    line = "float64 sha256 x86_64 aarch64 py3 utf8 http2 md5 manylinux2014_x86_64 'float32'"
    assert cause_of("failed", line).pattern == line


def test_each_placeholder_is_one_token_whatever_it_replaced() -> None:
    assert cause_of("failed", "offset 0x1f3a").pattern == "offset <hex>"
    assert cause_of("failed", "shape (123456,)") == cause_of("failed", "shape (98765,)")
    assert cause_of("failed", "after 150000 ms") == cause_of("failed", "after 900 ms")
    assert cause_of("failed", "id 12345678901234567890") == cause_of("failed", "id 1")


def test_a_shared_beginning_never_merges_two_causes() -> None:
    head = "x" * MAX_PATTERN
    one, two = cause_of("failed", head + " one"), cause_of("failed", head + " two")
    assert one.pattern == two.pattern  # what is shown is cut at the same place ...
    assert one.key != two.key  # ... but the key is of the whole pattern


def test_the_key_is_the_patterns_whatever_the_version() -> None:
    cause = cause_of("failed", "KeyError: 'x'")
    assert cause.key == key_of("summary", "KeyError: <quoted>")
    assert cause.grouping_version == GROUPING_VERSION
    assert named([cause, cause, None]) == [
        {"cause": cause.key, "pattern": cause.pattern, "grouping_version": GROUPING_VERSION}
    ]


def test_attempts_that_ended_without_a_result_have_causes_of_their_own() -> None:
    lapsed = cause_of("lease_expired", None)
    assert lapsed != cause_of("interrupt_expired", None) != cause_of("endpoint_revoked", None)
    assert lapsed != cause_of("failed", lapsed.pattern), "a worker's words never pose as one"
    assert cause_of("failed", None).pattern == NO_SUMMARY == cause_of("failed", " \n ").pattern


def test_every_attempt_that_ends_without_a_result_is_named_by_its_outcome() -> None:
    ended = {AttemptOutcome.LEASE_EXPIRED, AttemptOutcome.INTERRUPT_EXPIRED}
    ended |= {AttemptOutcome.ENDPOINT_REVOKED}
    for outcome in AttemptOutcome:
        cause = cause_of(outcome.value, "exit 1")
        assert (cause.pattern != "exit <n>") == (outcome in ended), outcome


def test_the_meaningful_line_is_the_last_that_says_something() -> None:
    assert meaningful_line("Traceback\n  frame\nOSError: boom\n\n  \n") == "OSError: boom"
    assert meaningful_line(None) == ""


@given(st.text(max_size=400))
def test_any_summary_has_a_bounded_cause(summary: str) -> None:
    cause = cause_of("failed", summary)
    assert len(cause.key) == 16 and 0 < len(cause.pattern) <= MAX_PATTERN
    assert cause_of("failed", summary) == cause


# Words a summary is made of around its numbers, tricky ones included: units a number can
# carry, names with digits, quoted values, addresses, hex, paths.
WORDS = st.sampled_from([
    "ValueError:", "timed", "out", "after", "s", "ms", "seconds", "MB", "GiB", "bytes", "of",
    "float64", "sha256", "x86_64", "py3", "'quoted'", "'float32'", "/tmp/x", "a/b/c",
    "10.0.0.1", "[::1]:8080", "0x1f", "deadbeef", "pypi.org", "shape", "size", "Errno", "m",
    "at", "line", "column", "v", "e",
])  # fmt: skip
SEPARATORS = st.sampled_from([" ", ", ", " (", ") ", "=", " [", "] ", " #", ": "])
NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=10**30).map(str),
    st.tuples(st.integers(0, 10**9), st.integers(0, 10**9)).map(lambda p: f"{p[0]}.{p[1]}"),
)


@given(
    st.lists(st.tuples(st.one_of(WORDS, st.none()), SEPARATORS), min_size=1, max_size=12),
    st.data(),
)
def test_replacing_a_number_by_another_of_any_length_never_changes_the_key(
    parts: list[tuple[str | None, str]], data: st.DataObject
) -> None:
    """A part that is None is a number: any two fillings of those places are one cause."""

    def filled() -> str:
        words = [data.draw(NUMBERS) if word is None else word for word, _ in parts]
        return "".join(word + separator for word, (_, separator) in zip(words, parts, strict=True))

    one, other = filled(), filled()
    assert cause_of("failed", one).key == cause_of("failed", other).key, (one, other)

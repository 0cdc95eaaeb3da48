"""Why attempts fail, grouped as a person would group them: a cause is the fingerprint of a
failure summary's meaningful line with everything that varies between occurrences of the
same failure replaced by one placeholder each, by the rules error-grouping tools settled on
(Sentry's message parameterization): URLs, e-mail addresses, quoted values, UUIDs, dates and
times, paths, IP addresses with their ports, host names, versions, durations, sizes, numbers
of any length and hex. A word that mixes letters and digits (`float64`, `sha256`, `x86_64`,
`py3`) names a type, an algorithm or a platform, so it stays. "YARA scan timed out after 10 s
on scratch/x1/a-1.2.tgz" and the same after 12 s on another file are one cause. The key
hashes the whole pattern, so two causes never merge because they share a beginning, and it
does not depend on GROUPING_VERSION: a pattern the next version leaves alone keeps its key.
Pure: no database, no clock."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

# The version of these rules, stored with every cause. Changing what a summary groups into
# takes a new version and a migration that regroups what exists once (0020 brought 2; 1 was
# the first rule, which split numbers by their length).
GROUPING_VERSION = 2
# The longest pattern kept; the key is taken before the cut, so the cut merges nothing.
MAX_PATTERN = 300

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\b\.?"
)
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?"
_CLOCK = r"(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:[.,]\d+)?)?"
_ZONE = r"(?:\s?(?:Z|UTC|GMT|[+-][01]\d:?[0-5]\d)\b|Z)"
_HEX4 = r"[0-9a-fA-F]{1,4}"
_IPV4 = r"\d{1,3}(?:\.\d{1,3}){3}"
_IPV6 = (
    rf"(?:(?:{_HEX4}:){{7}}{_HEX4}"
    rf"|::(?:ffff:)?{_IPV4}"
    rf"|(?:{_HEX4}:){{1,7}}:(?:{_HEX4}(?::{_HEX4}){{0,6}})?"
    rf"|::{_HEX4}(?::{_HEX4}){{0,6}})"
    r"(?:%[\w.-]+)?"
)
# Top-level domains a host name ends in; not every one there is (`.py`, `.sh`, `.rs`, `.so`,
# `.id`, `.int`, `.app` and `.info` end file names and attributes far more often than hosts do).
_TLD = (
    r"(?:com|net|org|edu|gov|mil|biz|io|dev|ai|co|cloud|xyz|tech|online|site|arpa"
    r"|uk|de|fr|jp|cn|ru|nl|eu|ch|ca|au|br|se|fi|dk|cz|kr|tw|es|ie|nz|za|sg|hk|il|mx"
    r"|local|localdomain|internal|lan|home|corp|svc|test|example|invalid)"
)
_SEGMENT = r"[\w.@+%~=-]"
_EXTENSION = r"\.[A-Za-z][A-Za-z0-9]{0,7}"
_ARCHIVE = r"(?:whl|tar\.gz|tar\.bz2|tar\.xz|tgz|zip|egg|gem|jar|crate|nupkg|tar)"
_UNTIL_WORD_ENDS = r"(?![\w])"

# One alternative per placeholder, tried in this order where several start at one place:
# the earlier swallow what the later would otherwise split (a URL's host is not a host, a
# path's version is not a version, a date's numbers are not numbers). The scan is leftmost
# first, so a quoted value is taken whole before anything inside it.
_KINDS: tuple[tuple[str, str], ...] = (
    (
        "url",
        r"(?<![\w+.-])[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>`]+?(?=[.,;:!?)\]}]*(?:[\s'\"<>`]|$))",
    ),
    ("email", r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"),
    ("quoted", r"(?<!\w)(?:'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`)"),
    (
        "uuid",
        r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
        r"[0-9a-fA-F]{12}(?![\w-])",
    ),
    (
        "date",
        # ISO 8601 and RFC 3339, with or without a time and a zone; 2026/09/27, 27/09/2026
        rf"(?<![\w.-])(?:\d{{4}}-[01]\d-[0-3]\d(?:[T ]{_CLOCK}{_ZONE}?)?"
        rf"|\d{{4}}/[01]\d/[0-3]\d(?:[T ]{_CLOCK})?"
        rf"|[0-3]?\d/[01]?\d/\d{{4}}(?:[ :]{_CLOCK})?"
        # RFC 1123 (HTTP, e-mail): Sun, 27 Sep 2026 10:14:00 GMT; and syslog's Sep 27 10:14:00
        rf"|(?:{_WEEKDAY}\s)?[0-3]?\d[\s/-]{_MONTH}[\s/-]\d{{4}}(?:[\s:]{_CLOCK}{_ZONE}?)?"
        rf"|(?:{_WEEKDAY}\s)?{_MONTH}\s+[0-3]?\d(?:st|nd|rd|th)?"
        rf"(?:,?\s\d{{4}})?(?:\s{_CLOCK}{_ZONE}?)?(?:\s\d{{4}})?)(?!\w|:\d)",
    ),
    ("time", rf"(?<![\w:.])(?:[01]?\d|2[0-3]):[0-5]\d:[0-5]\d(?:[.,]\d+)?{_ZONE}?(?!\w|:\d)"),
    ("path", r"(?<!\w)(?:[A-Za-z]:\\|\\\\)[^\s:,;'\"]+"),  # C:\dir\file, \\host\share
    (
        "path",
        # /abs/path, ~/x, ./x, ../x; a/b/c; dir/file.ext; a distribution's file name
        rf"(?<![\w./~-])(?:~\w*|\.{{1,2}})?/{_SEGMENT}+(?:/{_SEGMENT}*)*"
        rf"|(?<![\w.@+%~=/-])(?={_SEGMENT}*/){_SEGMENT}+/"
        rf"(?:{_SEGMENT}+/{_SEGMENT}+(?:/{_SEGMENT}+)*/?|[\w@+%~=-]*(?:{_EXTENSION})+(?![\w/]))"
        rf"|(?<![\w.+-])(?=[\w.+-]*\.{_ARCHIVE}(?!\w))[\w+-]+(?:\.[\w+-]+)*\.{_ARCHIVE}(?!\w)",
    ),
    (
        "address",
        rf"(?<![\w.]){_IPV4}(?:/\d{{1,2}})?(?::\d{{1,5}})?(?!\w|\.\d)"
        rf"|(?<!\w)\[{_IPV6}\](?::\d{{1,5}})?"
        rf"|(?<![\w:.])(?=[0-9a-fA-F:.]*\d){_IPV6}(?![\w:])",
    ),
    (
        "host",
        r"(?<![\w.@-])(?:(?=[\w-]+\.)(?:[A-Za-z0-9-]+\.)+"
        rf"(?i:{_TLD})|localhost)(?::\d{{1,5}})?(?![\w-]|\.\w)",
    ),
    (
        "version",
        r"(?<![\w.])(?:[vV]\d+(?:\.\d+)+|\d+(?:\.\d+){2,})"
        r"(?:[-._]?(?:a|b|c|rc|alpha|beta|pre|preview|post|dev|final|snapshot|SNAPSHOT)\.?\d*)*"
        r"(?:\+[\w.]+)?(?![\w])",
    ),
    (
        "duration",
        r"(?<![\w.])(?:(?:\d+(?:\.\d+)?(?:h|m|s|ms|us|µs|ns)){2,}"
        r"|\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|msecs?|milliseconds?|s|secs?|seconds?|m|mins?"
        r"|minutes?|h|hrs?|hours?|d|days?))(?![\w])",
    ),
    (
        "size",
        r"(?<![\w.])\d+(?:\.\d+)?(?:\s?(?:[KMGTPE]i?B|kB|kb|bytes?|B)|[KMGTPEk])(?![\w])",
    ),
    ("n", r"(?:(?<![\w.-])-)?(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"),
    (
        "hex",
        r"(?<![\w.])(?:0[xX][0-9a-fA-F]+|(?=[a-f]*\d)[0-9a-f]{7,}|(?=[A-F]*\d)[0-9A-F]{7,})"
        r"(?![\w])",
    ),
)
# Every kind starts where no word goes on (or at the line's start), and what it replaces has
# a digit or one of these characters within the first 100 of its run of non-space, or starts
# with a name of a day or month or `localhost`. Saying so first lets the scan pass over the
# middle of every word, and over every plain word, without trying each kind there: a third
# of the time, and a run of punctuation is read 100 characters at a time, not to its end.
_MAY_VARY = (
    r"(?=\S{0,99}[\d/\\@:.'\"`\[-]|localhost"
    r"|Mon|Tue|Wed|Thu|Fri|Sat|Sun|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
)
_SCAN = re.compile(
    rf"(?<!\w){_MAY_VARY}(?:"
    + "|".join(f"(?P<{kind}_{n}>{rule})" for n, (kind, rule) in enumerate(_KINDS))
    + ")"
)
# A quoted word that mixes letters and digits ('float64', 'x86_64') is a name, kept as it is
# unquoted; but a quoted run of hex is an id.
_NAME_WITH_DIGITS = re.compile(r"[A-Za-z_][A-Za-z_]*\d\w*")
_HEXISH = re.compile(r"[0-9a-fA-F]{7,}")
_SPACE = re.compile(r"\s+")
# What stands for a failure that said nothing, and for attempts that ended without a result.
NO_SUMMARY = "(no summary)"
# Keyed by the attempt outcomes' names (lifecycle/rules.py::AttemptOutcome), which the rules,
# importing this module, pass in.
_ENDED_BY_NAME = {
    "lease_expired": "the lease ran out before a result (the worker vanished?)",
    "interrupt_expired": "the wait ran out before a resume or a result",
    "endpoint_revoked": "the endpoint was revoked",
}


@dataclass(frozen=True, slots=True)
class Cause:
    """A group of failures: its key (stored and filtered on), the pattern shown, and the
    version of the rules that made it."""

    key: str
    pattern: str
    grouping_version: int = GROUPING_VERSION


def meaningful_line(summary: str | None) -> str:
    """The last non-empty line: where a traceback or a command's stderr says what failed."""
    for line in reversed((summary or "").splitlines()):
        if line.strip():
            return line.strip()
    return ""


def _placeholder(match: re.Match[str]) -> str:
    kind = (match.lastgroup or "").rpartition("_")[0]
    if kind == "quoted":
        inner = match.group()[1:-1]
        if _NAME_WITH_DIGITS.fullmatch(inner) and not _HEXISH.fullmatch(inner):
            return match.group()
    return f"<{kind}>"


def pattern_of(line: str) -> str:
    """`line` with its varying parts replaced by one placeholder each, spaces collapsed."""
    return _SPACE.sub(" ", _SCAN.sub(_placeholder, line)).strip()


def cause_of(outcome: str, summary: str | None) -> Cause:
    """The cause of an attempt that closed with `outcome` (a worker's or operator's failure,
    or an attempt that ended without a result) and `summary`."""
    ended = _ENDED_BY_NAME.get(outcome)
    if ended is not None:
        return _cause("ended", ended)
    return _cause("summary", pattern_of(meaningful_line(summary)) or NO_SUMMARY)


def key_of(kind: str, pattern: str) -> str:
    """The key of a pattern of `kind` ("summary" or "ended"), whatever the rules' version."""
    # The kind keeps a worker that writes "the endpoint was revoked" apart from a revocation.
    return hashlib.sha256(f"{kind}\n{pattern}".encode()).hexdigest()[:16]


def _cause(kind: str, pattern: str) -> Cause:
    return Cause(key_of(kind, pattern), pattern[:MAX_PATTERN])


def named(causes: Iterable[Cause | None]) -> list[dict[str, str | int]]:
    """Each distinct cause met, as the key, pattern and version the store keeps the first
    time."""
    distinct = {cause.key: cause for cause in causes if cause is not None}
    return [
        {"cause": c.key, "pattern": c.pattern, "grouping_version": c.grouping_version}
        for c in distinct.values()
    ]

"""Why attempts fail, grouped as a person would group them: a cause is the fingerprint of a
failure summary's meaningful line with everything that varies between occurrences of the
same failure (numbers, hex and UUID-like ids, addresses, paths, URLs, versions, quoted
values) replaced by placeholders. "YARA scan timed out after 10 s on scratch/x1/a-1.2.tgz"
and the same at 12 s on another file are one cause. The key hashes the whole pattern, so two
causes never merge because they share a beginning. Pure: no database, no clock."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from mainframe.lifecycle.rules import AttemptOutcome

# The longest pattern kept; the key is taken before the cut, so the cut merges nothing.
MAX_PATTERN = 300
# Placeholders, in the order they are applied: earlier ones swallow what later ones would
# otherwise split (a URL's path is not a path, an address is not a version).
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+"), "<url>"),
    (re.compile(r"\"[^\"]*\"|'[^']*'|`[^`]*`"), "<quoted>"),
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<id>",
    ),
    (re.compile(r"(?:[A-Za-z]:\\|\\\\)[^\s:,;]+"), "<path>"),  # C:\dir\file, \\host\share
    (re.compile(r"(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*|/[\w.@+-]+"), "<path>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<address>"),
    (re.compile(r"\b[vV]?\d+(?:\.\d+){2,}(?:[-+.][0-9A-Za-z]+)*\b"), "<version>"),
    (re.compile(r"\b(?:0x)?(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{6,}\b"), "<hex>"),
    (re.compile(r"(?<![A-Za-z])[-+]?\d+(?:[.,]\d+)*"), "<n>"),
)
_SPACE = re.compile(r"\s+")
# What stands for a failure that said nothing, and for attempts that ended without a result.
NO_SUMMARY = "(no summary)"
_ENDED = {
    AttemptOutcome.LEASE_EXPIRED: "the lease ran out before a result (the worker vanished?)",
    AttemptOutcome.INTERRUPT_EXPIRED: "the wait ran out before a resume or a result",
    AttemptOutcome.ENDPOINT_REVOKED: "the endpoint was revoked",
}


@dataclass(frozen=True, slots=True)
class Cause:
    """A group of failures: its key (stored and filtered on) and the pattern shown."""

    key: str
    pattern: str


def meaningful_line(summary: str | None) -> str:
    """The last non-empty line: where a traceback or a command's stderr says what failed."""
    for line in reversed((summary or "").splitlines()):
        if line.strip():
            return line.strip()
    return ""


def pattern_of(line: str) -> str:
    """`line` with its varying parts replaced by placeholders, spaces collapsed."""
    for rule, placeholder in _RULES:
        line = rule.sub(placeholder, line)
    return _SPACE.sub(" ", line).strip()


def cause_of(outcome: str, summary: str | None) -> Cause:
    """The cause of an attempt that closed with `outcome` (a worker's or operator's failure,
    or an attempt that ended without a result) and `summary`."""
    ended = _ENDED.get(AttemptOutcome(outcome)) if outcome in _OUTCOMES else None
    if ended is not None:
        return _cause("ended", ended)
    return _cause("summary", pattern_of(meaningful_line(summary)) or NO_SUMMARY)


_OUTCOMES = frozenset(outcome.value for outcome in AttemptOutcome)


def _cause(kind: str, pattern: str) -> Cause:
    # The kind keeps a worker that writes "the endpoint was revoked" apart from a revocation.
    digest = hashlib.sha256(f"{kind}\n{pattern}".encode()).hexdigest()
    return Cause(digest[:16], pattern[:MAX_PATTERN])


def named(causes: Iterable[Cause | None]) -> list[dict[str, str]]:
    """Each distinct cause met, as the key and pattern the store keeps the first time."""
    distinct = {cause.key: cause for cause in causes if cause is not None}
    return [{"cause": c.key, "pattern": c.pattern} for c in distinct.values()]

"""The YARA rules a dragonfly worker compiles: every `*.yara` file of one directory, named by
its stem, with a hash of the whole set. Each job carries that hash, and a worker whose rules
carry another fetches them again before scanning, so an edit reaches the fleet without a
restart. The directory is looked at (names, sizes, modification times) at most once a
second and read again only when that changed; the files are small and few, so the look and
the read run inline."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import orjson

from mainframe.clock import MICROS, Clock
from mainframe.logs import get_logger

# How long a look at the directory is trusted: a change is served within this and a poll.
LOOK_EVERY_US = MICROS
SUFFIX = ".yara"

# What was seen of each file: its name, size and modification time in nanoseconds.
Listing = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Rule texts by name, and the hash a job names them by."""

    rules: dict[str, str]
    hash: str


def rule_set(rules: dict[str, str]) -> RuleSet:
    """The rules with a sha256 of the whole set, whatever order they were read in (an empty
    set has its own, stable one)."""
    return RuleSet(rules, hashlib.sha256(orjson.dumps(sorted(rules.items()))).hexdigest())


class RulesDirectory:
    """The rule set of a directory (or none), read again once its files change."""

    def __init__(self, path: Path | None, *, clock: Clock) -> None:
        self.path = path
        self.clock = clock
        self._looked_at: int | None = None
        self._listing: Listing | None = None
        self._current = rule_set({})

    def current(self) -> RuleSet:
        """The rule set as of at most a second ago."""
        now = self.clock.now_us()
        if self.path is not None and (
            self._looked_at is None or now - self._looked_at >= LOOK_EVERY_US
        ):
            self._looked_at = now
            self._refresh(self.path)
        return self._current

    def _refresh(self, path: Path) -> None:
        try:
            listing = _listing(path)
            if listing == self._listing:
                return
            rules = {name.removesuffix(SUFFIX): _text(path / name) for name, _, _ in listing}
        except OSError as exc:
            # Keep serving the last rules read: a worker that cannot fetch keeps its own.
            get_logger().warning("dragonfly_rules_unreadable", path=str(path), error=str(exc))
            return
        self._listing = listing
        self._current = rule_set(rules)


def _listing(path: Path) -> Listing:
    found = []
    for entry in path.iterdir():
        if entry.name.endswith(SUFFIX) and entry.is_file():
            stat = entry.stat()
            found.append((entry.name, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(found))


def _text(path: Path) -> str:
    # YARA sources are text; a stray byte that is not UTF-8 must not stop the whole set.
    return path.read_bytes().decode("utf-8", errors="replace")

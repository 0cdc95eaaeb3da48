"""The code is grouped by concern into modules a reader takes in whole: a path is shortened
by putting what belongs together in one place, never by merging unrelated code into a long
module (ARCHITECTURE.md, the request paths)."""

from __future__ import annotations

from pathlib import Path

import mainframe

MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    root = Path(mainframe.__file__).parent
    sizes = {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for path in root.rglob("*.py")
    }
    assert len(sizes) > 100, "the package's modules were found"
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}

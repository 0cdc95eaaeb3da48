"""Where a server's CPU went: summarise the py-spy profiles that `bench.py --profile DIR` wrote.

For each profile (collapsed stacks, one `frame;frame;… count` per line) it prints the share
of samples by the package of the innermost Python frame (time inside a C extension counts
for the Python frame that called it: `sqlalchemy` holds the driver's execute), then the
busiest innermost functions.

    python bench/stacks.py /tmp/profiles
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# A frame as py-spy writes it: "function (path/to/file.py:line)".
FRAME = re.compile(r"^(?P<function>.*) \((?P<path>[^():]+)(?::\d+)?\)$")
TOP_FUNCTIONS = 12


def package_of(path: str) -> str:
    """The top-level package of a frame's file: `sqlalchemy`, `uvicorn`, `mainframe`, `asyncio`."""
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    elif (stdlib := re.search(r"/python3\.\d+/(.+)", path)) is not None:
        path = stdlib.group(1)
    return path.lstrip("/").split("/", 1)[0].removesuffix(".py") or "?"


def summarise(path: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Samples in all, per innermost package, and per innermost function."""
    packages: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1]
        found = FRAME.match(leaf)
        where = package_of(found.group("path")) if found else "?"
        function = f"{found.group('function')} ({where})" if found else leaf
        packages[where] += int(count)
        functions[function] += int(count)
        total += int(count)
    return total, packages, functions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    args = parser.parse_args()
    for path in sorted(args.directory.glob("*.txt")):
        total, packages, functions = summarise(path)
        if not total:
            continue
        print(f"\n## {path.name}: {total:,} samples\n")
        for name, count in packages.most_common():
            if count / total >= 0.01:
                print(f"{100 * count / total:5.1f} %  {name}")
        print()
        for name, count in functions.most_common(TOP_FUNCTIONS):
            print(f"{100 * count / total:5.1f} %  {name}")


if __name__ == "__main__":
    main()

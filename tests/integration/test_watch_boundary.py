"""The watcher and the server share no code but leaf modules: importing every watcher module
loads nothing of the server's store, API or effects, and the server's store loads nothing of
the watcher. Each side is imported in a fresh interpreter, so nothing else has loaded it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mainframe.watch

SERVER = ("mainframe.store", "mainframe.api", "mainframe.effects", "mainframe.hooks")


def loaded_after(imports: list[str]) -> set[str]:
    code = "import sys\n" + "".join(f"import {name}\n" for name in imports)
    code += "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('mainframe'))))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())


def test_the_watch_package_never_imports_the_server() -> None:
    package = Path(mainframe.watch.__file__).parent
    modules = [f"mainframe.watch.{path.stem}" for path in sorted(package.glob("*.py"))]
    loaded = loaded_after(modules)
    assert "mainframe.watch.state" in loaded
    assert sorted(m for m in loaded if m.startswith(SERVER)) == []


def test_the_server_store_never_imports_the_watcher() -> None:
    loaded = loaded_after(
        ["mainframe.store", "mainframe.store.engine.schema", "mainframe.store.engine.migrate"]
    )
    assert sorted(m for m in loaded if m.startswith("mainframe.watch")) == []

"""External tools the suite drives: skipped on a developer's machine without them, a failure
in CI (CI=true), where .ci/run installs them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def required_binary(name: str, *, package: str, path: str | None = None) -> str:
    """The path of `name`, or skip (locally) / fail (in CI) saying which package brings it."""
    found = shutil.which(name) or (path if path and os.path.exists(path) else None)
    if found is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI (Debian package {package})")
        pytest.skip(f"{name} not installed (apt-get install {package})")
    return found


def promtool(*args: str, cwd: Path | None = None) -> str:
    """Run promtool (skip/fail as above), assert it succeeded, and return its stdout."""
    binary = required_binary("promtool", package="prometheus")
    done = subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout

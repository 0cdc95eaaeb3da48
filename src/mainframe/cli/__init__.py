"""The `mainframe` command line: `main.py` builds it from one module per group of commands;
`common.py` holds what they share."""

from __future__ import annotations

from mainframe.cli.main import app, main

__all__ = ["app", "main"]

"""`python -m mainframe` is the `mainframe` command."""

from __future__ import annotations

from mainframe.cli import main

main()

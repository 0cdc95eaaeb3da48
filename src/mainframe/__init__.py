"""Mainframe: coordinates package scans for a fleet of scanner workers."""

from __future__ import annotations

__version__ = "0.1.0"

"""What a dragonfly deployment's loader and bot read and keep beside the scans: package
lookups, the queue's status, reports to PyPI, the alert threshold and suppressions, each
scoped to the caller's endpoint (docs/dragonfly.md)."""

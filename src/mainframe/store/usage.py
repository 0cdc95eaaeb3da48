"""When each credential was last used, kept coarse so that no request writes for it: the
request only notes the digest it presented (a set, in memory), and a periodic flush writes
the noted ones in one transaction, each at most once a minute (`COARSE_US`). A digest that
names no token updates nothing; the set is bounded, so a flood of made-up tokens costs a
fixed amount of memory and drops only last-use notes, never a request."""

from __future__ import annotations

from mainframe.store.database import Database
from mainframe.store.sql import Sql

COARSE_US = 60_000_000  # a credential's last use is as fresh as this, at best
MAX_NOTED = 10_000  # digests noted between two flushes at most

TOUCH = Sql(
    "touch_token",
    """
    UPDATE tokens SET last_used_at = mf_now()
    WHERE token_hash = :digest
      AND (last_used_at IS NULL OR last_used_at <= mf_now() - :coarse)
    """,
)


class TokenUse:
    """The digests this process's requests presented since the last flush."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._noted: set[str] = set()

    def note(self, digest: str) -> None:
        if len(self._noted) < MAX_NOTED:
            self._noted.add(digest)

    async def flush(self) -> int:
        """Write the noted digests' last use; how many were noted."""
        if not self._noted:
            return 0
        noted, self._noted = self._noted, set()
        async with self.db.write() as tx:
            await tx.many(TOUCH, [{"digest": d, "coarse": COARSE_US} for d in sorted(noted)])
        return len(noted)

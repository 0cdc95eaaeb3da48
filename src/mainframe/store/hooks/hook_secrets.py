"""Hook signing secrets at rest: Fernet tokens under a key the database does not hold.

The key comes from MAINFRAME_SECRET_KEY (comma-separated Fernet keys: the first encrypts,
every one decrypts, so a key can be rotated), or else, for a SQLite file, from a key file
created with mode 0600 beside the database on first start. Without a key (PostgreSQL and no
MAINFRAME_SECRET_KEY) hooks cannot be created. A lost key makes the stored secrets
unreadable: those hooks are disabled with reason `secret_unreadable` until rotated. The same
key material signs dragonfly workers' sessions, through keys derived from it (`subkeys`)."""

from __future__ import annotations

import base64
import contextlib
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sqlalchemy.engine import make_url

from mainframe.parsers import parse_keys

KEY_FILE_SUFFIX = ".secret-key"


class SecretBox:
    """Seals and opens hook secrets with one or more Fernet keys."""

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise ValueError("a secret box needs at least one key")
        self._keys = list(keys)
        self._fernet = MultiFernet([Fernet(key) for key in keys])

    def subkeys(self, purpose: bytes) -> list[bytes]:
        """32-byte keys for another use of the same key material, one per Fernet key in the
        same order (the first is the current one), derived with HKDF-SHA256 under `purpose`."""
        return [
            HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(
                base64.urlsafe_b64decode(key)
            )
            for key in self._keys
        ]

    def seal(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def open(self, token: str | None) -> str | None:
        """The secret, or None when no key of this box can read the token."""
        if token is None:
            return None
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            return None


def key_file_for(database_url: str) -> Path | None:
    """Where a SQLite database keeps its key file; None for PostgreSQL or in-memory SQLite."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database + KEY_FILE_SUFFIX)


def read_or_create_key(path: Path) -> bytes:
    """The key in `path`, created first (mode 0600, atomically) if there is none."""
    with contextlib.suppress(FileNotFoundError):
        return path.read_bytes().strip()
    fresh = Fernet.generate_key()
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(fresh + b"\n")
            out.flush()
            os.fsync(out.fileno())
        # link() fails if another process created the key first: then theirs is the key.
        os.link(partial, path)
        return fresh
    except FileExistsError:
        return path.read_bytes().strip()
    finally:
        partial.unlink(missing_ok=True)


def open_box(secret_key: str | None, database_url: str) -> SecretBox | None:
    """The box for this server: from MAINFRAME_SECRET_KEY, else the SQLite key file, else a
    key for this process only (in-memory SQLite), else None (PostgreSQL without a key)."""
    if secret_key:
        return SecretBox(parse_keys(secret_key))
    if not database_url.startswith("sqlite"):
        return None  # a PostgreSQL URL may name several hosts, which make_url refuses
    path = key_file_for(database_url)
    return SecretBox([Fernet.generate_key() if path is None else read_or_create_key(path)])

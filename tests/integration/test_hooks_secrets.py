"""Hook secrets at rest: Fernet under a key the database does not hold, from the setting or a
0600 key file beside a SQLite database."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from mainframe.parsers import parse_keys
from mainframe.store.hooks.hook_secrets import SecretBox, key_file_for, open_box


def test_sealed_secret_is_not_the_secret_and_opens_again() -> None:
    box = SecretBox([Fernet.generate_key()])
    token = box.seal("whsec_abc")
    assert "whsec_abc" not in token
    assert box.open(token) == "whsec_abc"


def test_another_key_cannot_open_and_says_so_with_none() -> None:
    token = SecretBox([Fernet.generate_key()]).seal("whsec_abc")
    assert SecretBox([Fernet.generate_key()]).open(token) is None


def test_key_rotation_first_key_seals_every_key_opens() -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    token = SecretBox([old]).seal("whsec_old")
    both = open_box(f"{new.decode()},{old.decode()}", "postgresql://x@h/db")
    assert both is not None and both.open(token) == "whsec_old"
    assert SecretBox([new]).open(both.seal("whsec_new")) == "whsec_new"


def test_bad_keys_are_refused() -> None:
    with pytest.raises(ValueError):
        parse_keys("not-a-key")
    with pytest.raises(ValueError):
        parse_keys(" , ")


def test_sqlite_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mainframe.db'}"
    path = key_file_for(url)
    assert path == tmp_path / "mainframe.db.secret-key"
    first = open_box(None, url)
    assert first is not None and path.exists()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = open_box(None, url)
    assert again is not None and again.open(first.seal("whsec_x")) == "whsec_x"
    assert [p.name for p in tmp_path.iterdir()] == ["mainframe.db.secret-key"]


def test_postgresql_without_a_key_has_no_box_and_memory_sqlite_has_its_own() -> None:
    assert open_box(None, "postgresql://postgres@127.0.0.1/test") is None
    assert key_file_for("sqlite://") is None
    assert open_box(None, "sqlite://") is not None

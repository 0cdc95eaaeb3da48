"""Every statement the store runs, printed per dialect to a checked-in file, so any change to
the server's SQL shows up in a diff; and the column lists that decode whole scans kept in
the one order `records.scan_from_row` reads.

After an intended change, rewrite the files with `MAINFRAME_UPDATE_GOLDEN=1 pytest
tests/unit/test_store_sql.py` and commit them with the change."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import textwrap
from pathlib import Path

import pytest

import mainframe.store
from mainframe.lifecycle.scans import SCAN_COLUMNS
from mainframe.store.engine.database import REGISTRY, Sql

GOLDEN = Path(__file__).parents[1] / "golden"


def _every_statement() -> list[Sql]:
    """Import every store module (each registers its statements), then list them by name."""
    for module in pkgutil.iter_modules(mainframe.store.__path__):
        importlib.import_module(f"mainframe.store.{module.name}")
    return [REGISTRY[name] for name in sorted(REGISTRY)]


def _printed(dialect: str) -> str:
    blocks = []
    for sql in _every_statement():
        text = textwrap.dedent(sql.sqlite if dialect == "sqlite" else sql.pg_text).strip()
        blocks.append(f"-- {sql.name}\n{text};\n")
    return "\n".join(blocks)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_every_statement_is_in_the_golden_file(dialect: str) -> None:
    path = GOLDEN / f"store.{dialect}.sql"
    printed = _printed(dialect)
    if os.environ.get("MAINFRAME_UPDATE_GOLDEN") == "1":
        path.write_text(printed)
    assert path.read_text() == printed, (
        f"the store's SQL changed: review the diff of {path.name} after "
        "MAINFRAME_UPDATE_GOLDEN=1 and commit it"
    )


_WHOLE_SCAN = re.compile(r"(?:scans\.)?id,\s+(?:scans\.)?endpoint_id,\s+(?:scans\.)?queue\b")


@pytest.mark.parametrize("sql", _every_statement(), ids=lambda sql: sql.name)
def test_a_whole_scan_is_always_listed_in_the_decoding_order(sql: Sql) -> None:
    for text in (sql.sqlite, sql.pg_text):
        for start in (m.start() for m in _WHOLE_SCAN.finditer(text)):
            head = text[start:].split("redrive_count")[0] + "redrive_count"
            listed = re.findall(r"(?:scans\.)?(\w+)", head)
            if len(listed) != len(SCAN_COLUMNS):
                continue  # a few columns, or a CTE's own list: not decoded as a whole scan
            slots = zip(listed, SCAN_COLUMNS, strict=True)
            wrong = [(got, want) for got, want in slots if got not in (want, "NULL")]
            assert not wrong, f"{sql.name}: {wrong}"

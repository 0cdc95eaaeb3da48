"""The store's SQL lives in its parts' `statements.sql` files, loaded by name
(`store/engine/statements.py`): every statement there is run by some module and loads for
both databases, and no other module of the server holds SQL text but the engine's
connection set-up and the schema. The column lists that decode whole scans are kept in the
one order `records.scan_from_row` reads."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import mainframe.store
from mainframe.lifecycle.scans import SCAN_COLUMNS
from mainframe.store.engine.database import REGISTRY, Sql
from mainframe.store.engine.statements import PARTS, STORE, _texts

SRC = Path(mainframe.store.__file__).parents[2]
# What may hold SQL text outside the statements files: the engine's connection set-up (pragmas,
# session settings, the clock, the transaction's BEGIN) and the schema's partial indexes.
SQL_HOLDERS = {
    "store/engine/migrate.py",
    "store/engine/pg_settings.py",
    "store/engine/postgres.py",
    "store/engine/sqlalchemy_engine.py",
    "store/engine/sqlite.py",
}
_SQL = re.compile(
    r"^\s*(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|WITH \w+ AS|PRAGMA|SET|BEGIN|ANALYZE)\b"
)


def _every_statement() -> list[Sql]:
    """Import every store module (each asks for its statements), then list them by name."""
    for module in pkgutil.walk_packages(mainframe.store.__path__, "mainframe.store."):
        if ".migrations" not in module.name:
            importlib.import_module(module.name)
    return [REGISTRY[name] for name in sorted(REGISTRY)]


def test_every_statement_in_the_files_is_run_by_the_store() -> None:
    asked = {sql.name for sql in _every_statement()}
    assert sorted(set(_texts()) - asked) == [], "statements no module asks for"
    assert sorted(asked - set(_texts())) == [], "statements asked for that no file holds"


def test_each_part_keeps_its_statements_in_one_file() -> None:
    files = sorted(str(p.relative_to(STORE)) for p in STORE.rglob("*.sql"))
    assert files == sorted(f"{part}/statements.sql" for part in PARTS)


def _holds_sql(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if _SQL.match(text):
            return True
    return False


def test_no_other_module_of_the_server_holds_sql_text() -> None:
    holders = {
        str(p.relative_to(SRC / "mainframe"))
        for p in (SRC / "mainframe").rglob("*.py")
        if "migrations" not in p.parts and "watch" not in p.parts and _holds_sql(p)
    }
    assert holders == SQL_HOLDERS


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

"""The store's SQL lives in its parts' `statements.sql` files, loaded by name
(`store/engine/statements.py`): every statement there is run by some module and loads for
both databases, and no module of the server holds SQL text: the engine's connection set-up
(pragmas, BEGIN, session settings) is read from the engine's file too."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import mainframe.store
from mainframe.store.engine.database import REGISTRY, Sql
from mainframe.store.engine.statements import PARTS, STORE, _texts

SRC = Path(mainframe.store.__file__).parents[2]
# The watcher keeps its own database (watch/, docs/watch.md); the schema's tables and their
# partial indexes are SQLAlchemy Core (store/engine/schema.py, the migrations).
SQL_HOLDERS: set[str] = set()
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

"""The docs name only what exists: every file, module, migration and function a README,
ARCHITECTURE, CONTRIBUTING or docs/ page names in backticks is in the tree, and ARCHITECTURE
lists every capability of the store and every task that runs beside the requests."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "mainframe"
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "ARCHITECTURE.md",
        ROOT / "CONTRIBUTING.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "bench").glob("*.md"),
    ]
)
SUFFIXES = ("py", "md", "yml", "yaml", "toml", "sql", "sh", "json", "html", "css", "ini")
# `path/to/file.py`, `file.py::function`, `file.py` (a path under the repository or the
# package, or a file name found in the tree).
NAMED_FILE = re.compile(rf"^(?P<path>[\w./-]*\w\.(?:{'|'.join(SUFFIXES)}))(?:::(?P<name>[\w.]+))?$")
# Where a name may resolve: the repository, the package, or a folder of either.
BASES = (ROOT, PACKAGE, ROOT / "src")
# Files that exist only once a command has run, and one the docs name to say it is absent.
MADE_BY_COMMANDS = {"mainframe.db", "watch.db", "watch.toml", "alertmanager.yml"}
NAMED_AS_ABSENT = {"alembic.ini"}


def backticked(page: Path) -> list[str]:
    """Every `inline code` span of a page, outside fenced blocks."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return re.findall(r"`([^`\n]+)`", text)


@cache
def tree() -> dict[str, list[Path]]:
    """Every file of the repository by name (not the venv, caches or git)."""
    skip = {".venv", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules"}
    found: dict[str, list[Path]] = {}
    for path in ROOT.rglob("*"):
        if path.is_file() and not skip & set(path.relative_to(ROOT).parts):
            found.setdefault(path.name, []).append(path)
    return found


def resolve(named: str) -> list[Path]:
    """The files `named` can mean: a path from a base, or (a bare name) any file so named."""
    hits = [base / named for base in BASES if (base / named).is_file()]
    if hits:
        return hits
    matches = tree().get(Path(named).name, [])
    return [p for p in matches if p.as_posix().endswith("/" + named.lstrip("./"))]


def defines(path: Path, dotted: str) -> bool:
    """Whether `path` (Python) defines `dotted` (a function, class, constant or method)."""
    module = ast.parse(path.read_text(encoding="utf-8"))
    scope: list[ast.stmt] = module.body
    for part in dotted.split("."):
        found = None
        for node in scope:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name == part:
                    found = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == part for t in targets):
                    return True
        if found is None:
            return False
        scope = found.body if isinstance(found, ast.ClassDef) else []
    return True


def named_files() -> list[tuple[str, str]]:
    return [
        (page.relative_to(ROOT).as_posix(), span)
        for page in PAGES
        for span in backticked(page)
        if NAMED_FILE.match(span) and not span.startswith("/")  # a URL's path, not a file
    ]


@pytest.mark.parametrize(("page", "span"), named_files())
def test_every_file_and_function_a_page_names_exists(page: str, span: str) -> None:
    match = NAMED_FILE.match(span)
    assert match is not None
    path, name = match["path"], match["name"]
    if Path(path).name in MADE_BY_COMMANDS | NAMED_AS_ABSENT:
        return
    hits = resolve(path)
    assert hits, f"{page} names {path}, which is not in the tree"
    if name is not None:
        assert any(defines(hit, name) for hit in hits), f"{page}: {path} has no {name}"


def test_every_store_capability_is_listed_in_architecture() -> None:
    """Each capability the Store holds (store/store.py) is named with its module."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    module = ast.parse((PACKAGE / "store" / "store.py").read_text(encoding="utf-8"))
    [store] = [n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "Store"]
    fields = [
        n.target.id
        for n in store.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    ]
    capabilities = [f for f in fields if f not in {"db", "clock"}]
    missing = [name for name in capabilities if f"`{name}`" not in text]
    assert missing == [], f"ARCHITECTURE.md lists no store capability {missing}"


def test_every_task_beside_the_requests_is_in_architecture() -> None:
    """Each coroutine wiring.py runs beside the requests is named where ARCHITECTURE says
    what runs beside them."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## What runs beside the requests", 1)[1].split("\n## ", 1)[0]
    module = ast.parse((PACKAGE / "wiring.py").read_text(encoding="utf-8"))
    [background] = [
        n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "_background"
    ]
    started = {
        node.func.id
        for node in ast.walk(background)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    } - {"list"}
    assert started, "wiring._background starts no task"
    missing = sorted(name for name in started if f"`{name}`" not in section)
    assert missing == [], f"ARCHITECTURE.md's 'What runs beside the requests' lacks {missing}"


@pytest.mark.parametrize(
    ("chain", "pattern"),
    [("store/engine", r"\d{4}_\w+\.py"), ("watch", r"w\d{4}_\w+\.py")],
)
def test_the_newest_migrations_contributing_names_are_the_newest(chain: str, pattern: str) -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    named = re.findall(rf"`({pattern})`", text)
    versions = PACKAGE / chain / "migrations" / "versions"
    newest = max(p.name for p in versions.glob("*.py") if re.fullmatch(pattern, p.name))
    assert named, f"CONTRIBUTING.md names no migration of the {chain} chain"
    assert max(named) == newest, f"CONTRIBUTING.md's newest {chain} migration is {max(named)}"

"""The docs name only what exists: every file and folder a README, ARCHITECTURE,
CONTRIBUTING, docs/ or bench/ page names in backticks is in the tree, and every name that
looks like code is defined in it (a module, class, function, method or constant) or is a
word the code holds that is not Python (a contract field, a setting, a metric, a statement,
a state, a log event...). ARCHITECTURE lists every capability of the store and every task
that runs beside the requests; the arrows it says never exist are .importlinter's
contracts; the statements that bind a status are the few it names."""

from __future__ import annotations

import ast
import configparser
import re
import sqlite3
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import get_type_hints

import pytest

from mainframe.store.engine.rows import Row, StrictDictRow, StrictRecord
from mainframe.store.engine.sqlite import SqliteRows
from tests import code_names

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
SUFFIXES = ("py", "md", "yml", "yaml", "toml", "sql", "sh", "json", "html", "css", "ini", "mako")
# `path/to/file.py`, `file.py::function`, `file.py::function(args)`, `file.py` (a path under
# the repository or the package, or a file name found in the tree).
NAMED_FILE = re.compile(
    rf"^(?P<path>[\w./-]*\w\.(?:{'|'.join(SUFFIXES)}))(?:::(?P<name>[\w.]+)(?:\(.*\))?)?$"
)
# Where a name may resolve: the repository, the package, or a folder of either.
BASES = (ROOT, PACKAGE, ROOT / "src")
# Files that exist only once a command has run, and one the docs name to say it is absent.
MADE_BY_COMMANDS = {"mainframe.db", "watch.db", "watch.toml", "alertmanager.yml"}
NAMED_AS_ABSENT = {"alembic.ini"}


def backticked(page: Path) -> list[str]:
    """Every `inline code` span of a page, outside fenced blocks; a span that runs onto the
    next line is one span, its line break a space (as Markdown reads it)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", text)]


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


# A folder or a path from a folder of the tree: `lifecycle/`, `tests/faults`, `.ci/run`.
NAMED_PATH = re.compile(r"^(?P<path>\.?[\w-]+(?:/[\w.-]+)*/?)$")
# A name that may be Python, maybe called: `wire()`, `Sql.pg_args(params)`, `rt.store.leasing`.
NAMED_CODE = re.compile(r"^(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(.*\))?$")
# A metric with its labels: `packages_reaped_total{reason}`, `packages_queue{state="paused"}`.
NAMED_METRIC = re.compile(r"^(?P<name>[a-z_]\w*)\{(?P<labels>[^}]*)\}$")
# Where a request's value sits, as a JSON path or a validation error's `loc` (`body.payload`).
LOCATIONS = {"body", "query", "path"}

# What a page names that is not Python, each kind read from the code that holds it.
NOT_PYTHON: dict[str, Callable[[], set[str]]] = {
    "a field of the contract or of watch.toml": code_names.fields,
    "a setting or an environment variable": code_names.settings,
    "a metric or its label": code_names.metrics,
    "a statement, keyword, function or name of the store's SQL": code_names.sql,
    "a state, outcome, reason, code or action (the code's enumerations)": code_names.states,
    "a word the code spells as a string": code_names.spelled,
    "a parameter or a keyword the code passes (a log line's field)": code_names.parameters,
    "an alert of the watcher": code_names.watch_alerts,
    "an alert rule or PromQL function of deploy/prometheus/": code_names.alerting,
    "an attribute the code reads": code_names.attributes,
    "a make target, a dependency or what CI installs": code_names.tooling,
}
# The rest, by hand: what a page names that lives outside this tree, each with where.
ELSEWHERE = {
    # PostgreSQL's catalogs and settings an operator reads or tunes (docs/reliability.md,
    # docs/scale-out.md, docs/runbook.md).
    "pg_stat_activity": "a view of PostgreSQL",
    "pg_stat_database": "a view of PostgreSQL (bench/dbwork.py reads it)",
    "pg_stat_user_tables.n_dead_tup": "a view of PostgreSQL and its column",
    "last_autovacuum": "a column of PostgreSQL's pg_stat_user_tables",
    "pg_total_relation_size": "a function of PostgreSQL",
    "superuser_reserved_connections": "a setting of PostgreSQL",
    "autovacuum_vacuum_scale_factor": "a setting of PostgreSQL",
    "autovacuum_vacuum_cost_delay": "a setting of PostgreSQL",
    "INCREMENTAL": "a value of SQLite's auto_vacuum",
    "query_wait_timeout": "a setting of PgBouncer",
    "max_client_conn": "a setting of PgBouncer",
    "default_pool_size": "a setting of PgBouncer",
    "max_prepared_statements": "a setting of PgBouncer",
    "resolve_timeout": "a setting of Alertmanager",
    "alembic_version": "Alembic's table of the revision (the server's chain)",
    # The dragonfly worker's own variables (its README), set by the person running it.
    "DRAGONFLY_BASE_URL": "the dragonfly worker's configuration",
    "DRAGONFLY_CLIENT_ID": "the dragonfly worker's configuration",
    "DRAGONFLY_CLIENT_SECRET": "the dragonfly worker's configuration",
    "DRAGONFLY_LOAD_DURATION": "the dragonfly worker's configuration",
    "console": "a value of MAINFRAME_LOG_FORMAT, which settings.py checks by pattern",
    "null": "JSON's null (docs/dragonfly.md: what a reply holds)",
    "nproc": "a command of coreutils (bench/README.md: what a report records)",
    "jq": "a JSON command-line tool (README: reading `mainframe stats --json`)",
}
# Libraries' names the pages name that the code does not import, where they live.
LIBRARY_NAMES = {
    "ServerErrorMiddleware": "starlette.middleware.errors.ServerErrorMiddleware",
    "RequestResponseCycle": "uvicorn.protocols.http.httptools_impl.RequestResponseCycle",
    "QueryParams": "starlette.datastructures.QueryParams",
    "SchemaValidator": "pydantic_core.SchemaValidator",
    "SchemaSerializer": "pydantic_core.SchemaSerializer",
}


@cache
def not_python() -> dict[str, set[str]]:
    return {kind: derive() for kind, derive in NOT_PYTHON.items()}


@cache
def words() -> frozenset[str]:
    """Every word the code holds that is not Python, of whatever kind."""
    return frozenset().union(*not_python().values())


def looks_like_code(name: str, called: bool) -> bool:
    """Whether a name reads as Python: called, dotted, with a capital or an underscore (a
    plain lower-case word is checked as a word)."""
    if not any(c.isalpha() for c in name):
        return False  # `_`, the character
    return called or "." in name or "_" in name or name != name.lower()


def kind_of(span: str) -> str | None:
    """What a span names: a file, a folder or path, a name that looks like code, a plain
    word (a module, a function, a state, a field...), a metric, or nothing the test checks
    (a route, a command line, SQL, a value with spaces)."""
    plain = re.fullmatch(r"[a-z][a-z0-9]*", span) is not None
    if (NAMED_FILE.match(span) and not span.startswith("/")) or (span in tree() and not plain):
        return "file"  # `file.py`, `Makefile`, `.importlinter`
    path = NAMED_PATH.match(span)
    if path and "/" in span and any((base / span.split("/")[0]).is_dir() for base in BASES):
        return "path"
    named = NAMED_CODE.match(span)
    if named and looks_like_code(named["name"], "(" in span):
        return "name"
    if plain:
        return "word"
    return "metric" if NAMED_METRIC.match(span) else None


def defined(name: str) -> bool:
    """Whether a name is a Python name of the tree or of a library, or a word the code holds
    that is not Python."""
    if code_names.code().resolves(name):
        return True
    first, *rest = name.split(".")
    if first in LIBRARY_NAMES:
        return code_names.in_library(".".join([LIBRARY_NAMES[first], *rest]))
    if name in words() or name in ELSEWHERE:
        return True
    # A field's place: `payload.distributions`, `observer.max_checkpoint_age_seconds`.
    if "." in name:
        return all(part in words() or part in LOCATIONS for part in name.split("."))
    # The README lists the MAINFRAME_HOOKS_* settings by the tail of their variable's name.
    return name.isupper() and any(
        w.endswith("_" + name) for w in words() if w.startswith("MAINFRAME_")
    )


def metric_defined(span: str) -> bool:
    """Whether a metric with labels (`packages_queue{state="paused"}`) is exported with them."""
    match = NAMED_METRIC.match(span)
    assert match is not None
    labels = re.findall(r"(\w+)\s*(?:=|,|$)", match["labels"])
    metrics = not_python()["a metric or its label"]
    return match["name"] in metrics and all(label in metrics for label in labels)


def checked(page: Path) -> list[tuple[str, str]]:
    """(kind, span) of each span of `page` the test checks."""
    found = [(kind_of(span), span) for span in backticked(page)]
    return [(kind, span) for kind, span in found if kind is not None]


def holds(kind: str, span: str) -> bool:
    if kind == "file":
        return True  # test_every_file_and_function_a_page_names_exists checks those
    if kind == "path":
        path = span.rstrip("/")
        return any((base / path).exists() for base in BASES)
    if kind == "metric":
        return metric_defined(span)
    if kind == "word":
        return defined(span)
    named = NAMED_CODE.match(span)
    assert named is not None
    return defined(named["name"])


def test_what_is_listed_by_hand_is_named_and_not_in_the_code() -> None:
    """ELSEWHERE and LIBRARY_NAMES hold only names a page writes that the code cannot vouch
    for: an entry the code now defines or spells, or no page names, goes."""
    named = {
        match["name"]
        for page in PAGES
        for kind, span in checked(page)
        if kind in {"name", "word"} and (match := NAMED_CODE.match(span))
    }
    derived = [n for n in ELSEWHERE if n in words() or code_names.code().resolves(n)]
    assert not derived, f"ELSEWHERE lists what the code holds: {derived}"
    assert not set(ELSEWHERE) - named, f"no page names {set(ELSEWHERE) - named}"
    firsts = {name.split(".")[0] for name in named}
    for name, dotted in LIBRARY_NAMES.items():
        assert name in firsts and code_names.in_library(dotted), name
        assert not code_names.code().resolves(name), f"the code reaches {name} itself"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_name_a_page_writes_is_defined(page: Path) -> None:
    """A name that looks like code is defined in the tree (or a library), or is a word the
    code holds that is not Python; a folder or path exists; a metric and its labels are
    exported."""
    missing = [span for kind, span in checked(page) if not holds(kind, span)]
    assert not missing, f"{page.relative_to(ROOT)} names what the code lacks: {missing}"


# The statements that bind a status, each with why. Every other statement filters on literal
# statuses: SQLite proves a partial index's predicate only from a literal, and PostgreSQL's
# generic plan (plan_cache_mode) keeps the index only for one (ARCHITECTURE.md, design notes).
BINDS_A_STATUS = {
    # The operator's listing filters by the status asked for, or none, as it walks the
    # primary key: no partial index's predicate to prove.
    "list_scans": "the operator's filter",
    "list_scans_newer": "the operator's filter",
    "count_scans": "the operator's filter",
    # Writes: the status a plan chose, set on the row, not a filter.
    "close_as_operator": "an operator's fail sets the status its plan chose",
    "insert_scans": "intake sets QUARANTINED or QUEUED, as the endpoint takes its scans",
    "insert_attempt": "the history row records the status the close settled",
    "complete_one": "a result of one sets the status its plan chose (COMPLETE's JSON item)",
}
# A bound status: a parameter named for one, or the status column set or compared to one.
BOUND_STATUS = re.compile(
    r":\w*status\w*|\bstatus\s*(?:=|<>|!=)\s*(?:CAST\()?:\w+|\bstatus\s+(?:NOT\s+)?IN\s*\([^)]*:\w",
    re.IGNORECASE,
)
STATEMENTS_FILES = sorted((PACKAGE / "store").glob("*/statements.sql"))


def statement_blocks() -> dict[str, str]:
    """Each statement's and fragment's text in the statements files, comments left out (both
    dialects' texts of one name together)."""
    blocks: dict[str, str] = {}
    for path in STATEMENTS_FILES:
        name = None
        for line in path.read_text(encoding="utf-8").splitlines():
            head = re.match(r"^-- (?:name|fragment): (\w+)", line)
            if head:
                name = head[1]
            elif name is not None:
                blocks[name] = blocks.get(name, "") + "\n" + line.split("--")[0]
    return blocks


def test_only_the_statements_architecture_excuses_bind_a_status() -> None:
    blocks = statement_blocks()
    binding = sorted(name for name, text in blocks.items() if BOUND_STATUS.search(text))
    assert binding == sorted(BINDS_A_STATUS), (
        "a statement binds a status that BINDS_A_STATUS does not excuse (or no longer does):"
        f" {sorted(set(binding) ^ set(BINDS_A_STATUS))}"
    )
    notes = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert "literal" in notes and all(
        f"`{name}`" in notes for name in ("list_scans", "count_scans")
    )


def test_rows_are_read_by_column_name_as_architecture_says() -> None:
    """`Row` takes a column's name and nothing else, so mypy refuses `row[0]`; the strict
    rows refuse a position and iteration at run time too."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert "`store/engine/rows.py`" in text and "by column name" in text
    assert get_type_hints(Row.__getitem__)["column"] is str
    assert not {"__iter__", "__len__", "__contains__"} & set(vars(Row))
    for strict in (StrictDictRow, StrictRecord):
        assert {"__getitem__", "__iter__"} <= set(vars(strict)), strict
    with sqlite3.connect(":memory:") as connection:
        connection.row_factory = SqliteRows(strict=True)
        row = connection.execute("SELECT 7 AS seven").fetchone()
    assert row["seven"] == 7
    with pytest.raises(TypeError):
        row[0]
    with pytest.raises(TypeError):
        list(row)


ARROWS = "The arrows that must never exist:"


def arrow_bullets() -> list[str]:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split(ARROWS, 1)[1].strip().split("\n\n", 1)[0]
    bullets = [" ".join(b.split()) for b in re.split(r"\n- ", "\n" + section) if b.strip()]
    assert bullets, f"ARCHITECTURE.md lists no arrow under {ARROWS!r}"
    return bullets


def contracts() -> list[configparser.SectionProxy]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter", encoding="utf-8")
    return [parser[s] for s in parser.sections() if s.startswith("importlinter:contract:")]


def listed(contract: configparser.SectionProxy, key: str) -> list[str]:
    return [m.strip() for m in contract.get(key, "").replace("|", "\n").split("\n") if m.strip()]


def module_of(span: str) -> str:
    """The module a backticked name means: `store/` and `store.engine` are the package's."""
    dotted = span.removesuffix("/").removesuffix(".py").replace("/", ".")
    known = code_names.code().modules
    return f"mainframe.{dotted}" if f"mainframe.{dotted}" in known else dotted


def covers(module: str, listed_modules: list[str]) -> bool:
    """Whether a contract's list takes in `module`: it or a package holding it is listed."""
    return any(module == m or module.startswith(m + ".") for m in listed_modules)


def forbidden_by_a_contract(source: str, target: str) -> bool:
    return any(
        c["type"] == "forbidden"
        and covers(source, listed(c, "source_modules"))
        and covers(target, listed(c, "forbidden_modules"))
        for c in contracts()
    )


def layered_by_a_contract(chain: list[set[str]]) -> bool:
    """Whether a layers contract orders these groups of parts, the lowest first."""
    for c in contracts():
        if c["type"] == "layers":
            layers = [{m.strip() for m in line.split("|")} for line in c["layers"].splitlines()]
            if chain == [layer for layer in layers[::-1] if layer != {""}]:
                return True
    return False


@pytest.mark.parametrize("bullet", arrow_bullets())
def test_every_arrow_architecture_forbids_is_a_contract_or_a_test(bullet: str) -> None:
    """Each arrow names what it forbids in backticks: every module on the left of → (both
    ways for ↔) is kept from every module on its right by a forbidden contract of
    .importlinter, a chain `a` ← `b` is a layers contract, and a test file it names exists."""
    spans = re.findall(r"`([^`]+)`", bullet)
    tests = [s for s in spans if s.startswith("tests/")]
    assert all((ROOT / t).is_file() for t in tests), tests
    if "←" in bullet:
        chain = bullet.split("(", 1)[1].split(")", 1)[0]
        groups = [
            {s.strip("/").split("/")[-1] for s in re.findall(r"`([^`]+)`", group)}
            for group in chain.split("←")
        ]
        assert layered_by_a_contract(groups), f"no layers contract orders {groups}"
        return
    arrow = "↔" if "↔" in bullet else "→"
    assert arrow in bullet, f"an arrow without →, ↔ or ←: {bullet}"
    left, right = bullet.split(arrow, 1)
    sources = [module_of(s) for s in re.findall(r"`([^`]+)`", left)]
    targets = [module_of(s) for s in re.findall(r"`([^`]+)`", right) if s not in tests]
    pairs = [(s, t) for s in sources for t in targets]
    pairs += [(t, s) for s, t in pairs] if arrow == "↔" else []
    assert pairs or tests, f"the arrow names no module and no test: {bullet}"
    missing = [pair for pair in pairs if not forbidden_by_a_contract(*pair)]
    assert not missing, f"no contract of .importlinter forbids {missing}"


def test_the_intervals_architecture_gives_the_tasks_are_theirs() -> None:
    """Each task beside the requests that runs at a fixed period (a constant wiring.py passes
    it) is given that period in ARCHITECTURE (`keep_activity` (every 5 s, …))."""
    text = " ".join((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split())
    constants: dict[str, float] = {
        name: float(node.value.value)
        for module in (PACKAGE / "sweeper.py", PACKAGE / "wiring.py")
        for node in ast.parse(module.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        if isinstance(node.value.value, int | float)
        for name in code_names.assigned(node)
    }
    wiring = ast.parse((PACKAGE / "wiring.py").read_text(encoding="utf-8"))
    periods = {
        call.func.id: constants[keyword.value.id]
        for call in ast.walk(wiring)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        for keyword in call.keywords
        if keyword.arg == "every" and isinstance(keyword.value, ast.Name)
        if keyword.value.id in constants
    }
    assert periods, "wiring.py passes no task a period of a constant"
    for task, seconds in periods.items():
        said = re.search(rf"`{task}` \(every ([\d.]+) s\b", text)
        assert said is not None, f"ARCHITECTURE.md gives `{task}` no period (every {seconds} s)"
        assert float(said[1]) == seconds, f"{task} runs every {seconds} s, not {said[1]}"


# One or more statements a page places in a module: "`heartbeat`, `wait` (`store/work/…py`".
PLACED = re.compile(r"((?:`[a-z_]+`(?:, | and | or )?)+) \(`([\w/.]+\.py)`")


def test_a_statement_a_page_places_in_a_module_is_asked_for_there() -> None:
    """Where a page says which module runs a statement, that module asks for it by name."""
    statements = set(statement_blocks())
    placed = []
    for page in PAGES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for match in PLACED.finditer(text):
            named = [n for n in re.findall(r"`([a-z_]+)`", match[1]) if n in statements]
            placed += [(page.relative_to(ROOT).as_posix(), n, match[2]) for n in named]
    assert placed, "no page places a statement in a module"
    wrong = [
        (page, name, path)
        for page, name, path in placed
        if not any(
            f'statement("{name}")' in hit.read_text(encoding="utf-8") for hit in resolve(path)
        )
    ]
    assert not wrong, f"these modules do not ask for these statements: {wrong}"

"""What the code defines and holds, read with `ast` and never run: every module, class,
function, method, attribute and module-level constant under src/, tests/ and bench/, whether
a dotted name a page writes (`lifecycle.rules.settle`, `rt.store.leasing.lease`) reaches one,
and the words the code holds that are not Python (its settings, metrics, SQL, enumerations,
strings), for tests/unit/test_docs_true.py."""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TypeVar, cast

N = TypeVar("N", bound=ast.AST)
ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mainframe"
# Where Python the pages name lives, and the dotted name of a file in each.
SOURCES = {ROOT / "src": "", ROOT / "tests": "tests.", ROOT / "bench": "bench."}
# The names the code gives its usual objects, so `rt.store.leasing` reads as the Runtime's
# store's leasing: each to the class (or a library's) it stands for.
VARIABLES = {
    "rt": "mainframe.wiring.Runtime",
    "store": "mainframe.store.store.Store",
    "db": "mainframe.store.engine.database.Database",
    "tx": "mainframe.store.engine.database.Tx",
    "conn": "asyncpg.Connection",
    "pool": "asyncpg.Pool",
}


@dataclass
class Module:
    name: str
    tree: ast.Module
    # Each top-level name: its defining node (class, function, assignment) or, imported, the
    # dotted name it was imported as.
    names: dict[str, ast.AST | str] = field(default_factory=dict)


@dataclass
class Class:
    module: Module
    node: ast.ClassDef
    # Each member: its annotation (a field, or `self.x` set from an annotated parameter) or
    # None (a method, a constant, an attribute of unknown type).
    members: dict[str, ast.expr | None] = field(default_factory=dict)


# What a dotted name can reach: a module, a class, a library's object, or a leaf (a
# function, a constant, a field of no class of ours) that has no members of its own.
Entity = Module | Class | tuple[str, object] | None
LEAF = None


def _module_name(path: Path) -> str:
    for base, prefix in SOURCES.items():
        if path.is_relative_to(base):
            parts = path.relative_to(base).with_suffix("").parts
            return prefix + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module's top level, into `if` and `try` blocks."""
    for node in body:
        if isinstance(node, ast.If | ast.Try):
            yield from _top_level(node.body + node.orelse + getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)
        else:
            yield node


def assigned(node: ast.stmt) -> list[str]:
    """The plain names an assignment binds."""
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names: list[str] = []
    for target in targets:
        elements = target.elts if isinstance(target, ast.Tuple) else [target]
        names += [t.id for t in elements if isinstance(t, ast.Name)]
    return names


def _names_of(module: Module) -> None:
    for node in _top_level(module.tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            module.names[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            module.names |= dict.fromkeys(assigned(node), node)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                module.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ImportFrom):  # relative: from . import x
            package = module.name.rsplit(".", node.level)[0]
            where = f"{package}.{node.module}" if node.module else package
            for alias in node.names:
                module.names[alias.asname or alias.name] = f"{where}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                module.names[bound] = alias.name if alias.asname else bound


def _members_of(node: ast.ClassDef) -> dict[str, ast.expr | None]:
    members: dict[str, ast.expr | None] = {}
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            members[item.name] = None
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                members |= _self_attributes(item)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            members[item.target.id] = item.annotation
        elif isinstance(item, ast.Assign):
            members |= dict.fromkeys(assigned(item))
    return members


def _self_attributes(method: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr | None]:
    """`self.x` a method sets, typed by its annotation or by the parameter it is set from."""
    parameters = {a.arg: a.annotation for a in method.args.args + method.args.kwonlyargs}
    found: dict[str, ast.expr | None] = {}
    for node in ast.walk(method):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    given = node.value.id if isinstance(node.value, ast.Name) else ""
                    typed = node.annotation if isinstance(node, ast.AnnAssign) else None
                    found[target.attr] = typed or parameters.get(given)
    return found


@dataclass
class Code:
    """Every module and class of the tree, by dotted name and by class name."""

    modules: dict[str, Module] = field(default_factory=dict)
    classes: dict[str, list[Class]] = field(default_factory=dict)

    def resolves(self, dotted: str) -> bool:
        """Whether `dotted` reaches something defined: its first part a module (or the end
        of one's name), a class, a top-level name, a member of a class, a name some module
        imports or a usual variable; each next part a member of what the last reached."""
        first, *rest = dotted.split(".")
        reached = self._starts(first)
        if first == "self" and rest:  # `self.lapses`: a member of a class of ours
            reached = [c for cs in self.classes.values() for c in cs if rest[0] in c.members]
        for part in rest:
            reached = [m for entity in reached for m in self._member(entity, part)]
        return bool(reached)

    def _starts(self, name: str) -> list[Entity]:
        found: list[Entity] = [
            module
            for dotted, module in self.modules.items()
            if dotted == name or dotted.endswith("." + name)
        ]
        found += self.classes.get(name, [])
        for module in self.modules.values():  # a top-level name, typed if `x = Class(...)`
            named = module.names.get(name)
            if named is not None:
                found += (
                    self._target(named)
                    if isinstance(named, str)
                    else self._module_member(module, name)
                )
        for cls in (c for classes in self.classes.values() for c in classes):
            if name in cls.members:  # `leasing.leased`: a member holding a Leasing
                found += self._class_member(cls, name)
        if name in VARIABLES:
            found += self._target(VARIABLES[name])
        if not found and name in _library_names():  # `DataError`: asyncpg.exceptions.DataError
            found += _library(_library_names()[name])
        if not found and hasattr(builtins, name):
            found.append(LEAF)
        return found

    def _member(self, entity: Entity, part: str) -> list[Entity]:
        if isinstance(entity, Module):
            return self._module_member(entity, part)
        if isinstance(entity, Class):
            return self._class_member(entity, part)
        if isinstance(entity, tuple) and hasattr(entity[1], part):
            return [("library", getattr(entity[1], part))]
        return []

    def _module_member(self, module: Module, part: str) -> list[Entity]:
        if f"{module.name}.{part}" in self.modules:
            return [self.modules[f"{module.name}.{part}"]]
        named = module.names.get(part)
        if isinstance(named, str):
            return self._target(named)
        if isinstance(named, ast.ClassDef):
            return [c for c in self.classes[part] if c.module is module]
        if isinstance(named, ast.Assign) and isinstance(named.value, ast.Call):
            return self._annotated(module, named.value.func) or [LEAF]  # x = Class(...)
        return [LEAF] if named is not None else []

    def _class_member(self, cls: Class, part: str) -> list[Entity]:
        if part in cls.members:
            annotation = cls.members[part]
            typed = self._annotated(cls.module, annotation) if annotation else []
            return typed or [LEAF]
        for base in cls.node.bases:
            for entity in self._annotated(cls.module, base):
                if found := self._member(entity, part):
                    return found
        return []

    def _annotated(self, module: Module, annotation: ast.expr) -> list[Entity]:
        """The class an annotation names (`X`, `X | None`, `mod.X`), as `module` sees it."""
        if isinstance(annotation, ast.BinOp):
            return self._annotated(module, annotation.left) or self._annotated(
                module, annotation.right
            )
        dotted = ast.unparse(annotation)
        if not dotted.replace(".", "").replace("_", "").isalnum():
            return []
        first, *rest = dotted.split(".")
        named = module.names.get(first)
        reached: list[Entity]
        if isinstance(named, str):
            reached = self._target(named)
        elif isinstance(named, ast.ClassDef):
            reached = [c for c in self.classes[first] if c.module is module]
        else:
            reached = []
        for part in rest:
            reached = [m for entity in reached for m in self._member(entity, part)]
        return [
            e
            for e in reached
            if isinstance(e, Class) or (isinstance(e, tuple) and isinstance(e[1], type))
        ]

    def _target(self, dotted: str) -> list[Entity]:
        """What an import's dotted name is: a module of the tree, a member of one, or a
        library's object."""
        if dotted in self.modules:
            return [self.modules[dotted]]
        parent, _, name = dotted.rpartition(".")
        if parent in self.modules:
            return self._module_member(self.modules[parent], name)
        return _library(dotted)


@cache
def _library_object(dotted: str) -> tuple[bool, object]:
    """A library's module or attribute by dotted name, imported (False when it is absent)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(found, part):
                return False, None
            found = getattr(found, part)
        return True, found
    return False, None


def in_library(dotted: str) -> bool:
    """Whether a library has `dotted` (`starlette.middleware.errors.ServerErrorMiddleware`)."""
    return _library_object(dotted)[0]


def _library(dotted: str) -> list[Entity]:
    """A library's object; a library not installed here (bench's pgqueuer) is taken on the
    word of the import that names it."""
    if dotted.startswith(PACKAGE):
        return []
    present, found = _library_object(dotted)
    if not present and importlib.util.find_spec(dotted.split(".")[0]) is None:
        return [LEAF]
    return [("library", found)] if present else []


@cache
def _library_names() -> dict[str, str]:
    """Each name the code reaches in a library, by its last part: what it imports (`alembic`
    of `from alembic import op`) and the attributes it reads of an imported library
    (`asyncpg.exceptions.DataError`)."""
    found: dict[str, str] = {}
    for module in _sources():
        libraries = {
            bound: dotted
            for bound, dotted in module.names.items()
            if isinstance(dotted, str) and not dotted.startswith(PACKAGE)
        }
        for dotted in libraries.values():
            found.setdefault(dotted.split(".")[0], dotted.split(".")[0])
        for node in _all(module, ast.Attribute):
            root: ast.expr = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in libraries:
                chain = ast.unparse(node)
                found.setdefault(node.attr, libraries[root.id] + chain[len(root.id) :])
    return found


def python_files() -> Iterator[Path]:
    skip = {"__pycache__", "node_modules"}
    for base in SOURCES:
        for path in sorted(base.rglob("*.py")):
            if not skip & set(path.parts):
                yield path


@cache
def code() -> Code:
    """The tree's modules and classes, each file parsed once."""
    found = Code()
    for path in python_files():
        module = Module(_module_name(path), ast.parse(path.read_text(encoding="utf-8")))
        _names_of(module)
        found.modules[module.name] = module
        for name, node in module.names.items():
            if isinstance(node, ast.ClassDef):
                cls = Class(module, node, _members_of(node))
                found.classes.setdefault(name, []).append(cls)
    return found


# What the code names that is not Python: each kind of word a page may write in backticks
# for something other than a Python name, read from the code that holds it.

# Prometheus's client adds these to a metric's name as scraped.
METRIC_KINDS = {"Counter": ("_total",), "Gauge": (), "Histogram": ("_bucket", "_sum", "_count")}
# A single word: a code, key, label, header, table, column or setting, not a sentence.
WORD = re.compile(r"^[A-Za-z_][\w.-]*$")
UPPER_WORD = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")


# This module and the test that reads the docs with it: the words they list by hand must come
# from the rest of the code to count as its words.
READERS = {"tests.code_names", "tests.unit.test_docs_true"}


def _sources() -> list[Module]:
    """Every module whose words count: all but the READERS."""
    return [m for name, m in code().modules.items() if name not in READERS]


def _modules(prefix: str) -> list[Module]:
    return [m for n, m in code().modules.items() if n == prefix or n.startswith(prefix + ".")]


@cache
def _nodes(name: str) -> dict[type, list[ast.AST]]:
    """A module's nodes by type, walked once for every question asked of it."""
    found: dict[type, list[ast.AST]] = {}
    for node in ast.walk(code().modules[name].tree):
        found.setdefault(type(node), []).append(node)
    return found


def _all(module: Module, kind: type[N]) -> list[N]:
    return cast(list[N], _nodes(module.name).get(kind, []))


def _strings(node: ast.AST) -> set[str]:
    return {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


@cache
def _module_strings(name: str) -> frozenset[str]:
    constants = _all(code().modules[name], ast.Constant)
    return frozenset(n.value for n in constants if isinstance(n.value, str))


def _calls(prefix: str) -> Iterator[tuple[str, ast.Call]]:
    """(the called name's last part, the call) of every call in the modules under `prefix`."""
    for module in _modules(prefix):
        for node in _all(module, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            yield name, node


def fields() -> set[str]:
    """The fields of the HTTP contract and of the watcher's configuration file (their pydantic
    models), with their aliases."""
    found: set[str] = set()
    for prefix in (f"{PACKAGE}.contract", f"{PACKAGE}.watch.config"):
        for module in _modules(prefix):
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ClassDef):
                    found |= {n for n, typed in _members_of(node).items() if typed is not None}
                elif isinstance(node, ast.keyword) and node.arg in {"alias", "validation_alias"}:
                    found |= _strings(node.value)
    return found


def settings() -> set[str]:
    """The settings, the environment variables that set them, and every other upper-case
    word the code, the Makefile or CI spell (variables they read or set: MAINFRAME_SCAN_ID,
    MAINFRAME_TEST_PG, PYTHONDONTWRITEBYTECODE)."""
    [home] = [c for c in code().classes["Settings"] if c.module.name == f"{PACKAGE}.settings"]
    names = {n for n, typed in home.members.items() if typed is not None}
    found = names | {f"MAINFRAME_{n.upper()}" for n in names}
    found |= {s for m in _sources() for s in _module_strings(m.name) if UPPER_WORD.match(s)}
    for script in (ROOT / "Makefile", ROOT / ".ci" / "run"):
        text = script.read_text(encoding="utf-8")
        found |= set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", text))
        found |= set(re.findall(r"^export ([A-Z]\w*)", text, re.M))
    return found


def metrics() -> set[str]:
    """Every metric the server and the watcher export, as scraped, and its labels."""
    found: set[str] = set()
    for name, call in _calls(PACKAGE):
        if name in METRIC_KINDS and call.args and isinstance(call.args[0], ast.Constant):
            metric = str(call.args[0].value)
            found |= {metric, *(metric + suffix for suffix in METRIC_KINDS[name])}
            found |= {s for arg in call.args[2:3] for s in _strings(arg)}
            found |= {s for k in call.keywords if k.arg == "labelnames" for s in _strings(k.value)}
    return found


def _sql_texts() -> list[str]:
    """The SQL of the code: each part of the store's statements.sql, the strings of the
    migrations, and the watcher's statements (SQLAlchemy's `text(...)`)."""
    store = ROOT / "src" / PACKAGE / "store"
    texts = [path.read_text(encoding="utf-8") for path in sorted(store.glob("*/statements.sql"))]
    for name, module in code().modules.items():
        if ".migrations.versions." in name:
            texts += _strings(module.tree)
    texts += [s for name, call in _calls(PACKAGE) if name == "text" for s in _strings(call)]
    return texts


def sql() -> set[str]:
    """The store's SQL: its statements' and fragments' names (`-- name: lease`), its keywords,
    the functions it calls, the names it gives (a CTE, an alias, what a migration creates)
    and the settings it reads."""
    patterns = [
        r"^-- (?:name|fragment): (\w+)",
        r"\b([A-Z][A-Z_]+)\b",  # BEGIN IMMEDIATE, SKIP LOCKED, ANALYZE
        r"\b([a-z_][a-z0-9_]*)\s*\(",  # mf_now(), json_each(...)
        r"\b([a-z_][a-z0-9_]*)\s+AS\s+(?:(?:NOT\s+)?MATERIALIZED\s+)?\(",  # a CTE
        r"\bAS\s+([a-z_][a-z0-9_]*)\b",
        r"\bCREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|TRIGGER|FUNCTION|VIEW|EXTENSION)\s+"
        r"(?:IF NOT EXISTS\s+)?(\w+)",
        r"(?:current_setting|set_config)\('([\w.]+)'",
    ]
    return {w for text in _sql_texts() for p in patterns for w in re.findall(p, text, re.M)}


def states() -> set[str]:
    """The members of every enumeration of the code (statuses, outcomes, reasons, codes,
    audit actions) with their values, and the values of its `Literal` types."""
    found: set[str] = set()
    for module in _modules(PACKAGE):
        for cls in _all(module, ast.ClassDef):
            if any(ast.unparse(base).endswith("Enum") for base in cls.bases):
                for item in cls.body:
                    if isinstance(item, ast.Assign):
                        found |= set(assigned(item)) | _strings(item.value)
        for subscript in _all(module, ast.Subscript):
            if ast.unparse(subscript.value) == "Literal":
                found |= _strings(subscript.slice)
    return found


def spelled() -> set[str]:
    """Every single word the code spells as a string: tables, columns and indexes (schema.py,
    the migrations), log events, refusal codes, JSON keys, labels, header and cookie names,
    the PostgreSQL settings the store relies on, the PgBouncer settings the tests write."""
    return {s for m in _sources() for s in _module_strings(m.name) if WORD.match(s)}


def parameters() -> set[str]:
    """The parameters of the code's functions and the keywords it passes (a log line's
    fields, `batch_size=` of pgqueuer's `QueueManager.run`)."""
    found: set[str] = set()
    for module in _sources():
        for arguments in _all(module, ast.arguments):
            found |= {a.arg for a in arguments.args + arguments.kwonlyargs + arguments.posonlyargs}
        found |= {k.arg for k in _all(module, ast.keyword) if k.arg}
    return found


def attributes() -> set[str]:
    """Every attribute the code reads or calls on something (`queries.enqueue`), a method of
    ours or a library's."""
    return {node.attr for m in _sources() for node in _all(m, ast.Attribute)}


def tooling() -> set[str]:
    """The Makefile's targets, the project's dependencies and what CI checks is installed."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    found = set(re.findall(r"^([\w-]+):", makefile, re.M))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {}).values()
    for requirement in [*project["dependencies"], *(r for extra in extras for r in extra)]:
        found.add(re.split(r"[\[<>=~! ;]", requirement, maxsplit=1)[0])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    return found | set(re.findall(r"missing\+=\(([\w-]+)\)", ci))


def watch_alerts() -> set[str]:
    """The watcher's alerts, as its policies name them (`delivery_failure`, `observer_` and
    a key of ObserverPolicy.firing) and as its Alertmanager sink sends them."""
    from mainframe.watch.engine import DELIVERY_ALERT, OBSERVER_ALERT_PREFIX
    from mainframe.watch.sinks import alertname

    [policy] = [c for c in code().classes["ObserverPolicy"] if c.module.name.endswith("policies")]
    [firing] = [n for n in policy.node.body if getattr(n, "name", "") == "firing"]
    keys = {
        str(key.value)
        for node in ast.walk(firing)
        if isinstance(node, ast.Dict)
        for key in node.keys
        if isinstance(key, ast.Constant)
    }
    alerts = {DELIVERY_ALERT} | {OBSERVER_ALERT_PREFIX + key for key in keys}
    return alerts | {alertname(alert) for alert in alerts}


def alerting() -> set[str]:
    """The shipped alert rules' names and the PromQL functions their expressions call."""
    found: set[str] = set()
    for path in (ROOT / "deploy" / "prometheus").glob("*.yml"):
        text = path.read_text(encoding="utf-8")
        found |= set(re.findall(r"\b([a-z_]+)\s*\(", text))
        found |= set(re.findall(r"^\s*-?\s*alert(?:name)?:\s*(\w+)", text, re.M))
    return found

"""ARCHITECTURE.md's glossary points at live code: each path it cites exists in the repository
(under its root or `mvp_tui/`), each `path:Name` or `path:Class.member` is defined in that
file, each class it names (`Name`, `Class.member`) is defined in the shipped code, and every
name it cites is used by shipped code (read somewhere, not only defined): the glossary says
what production does, so a name only tests call is a stale entry."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.shipped import shipped_files

REPO = Path(__file__).resolve().parents[2]
# A cited path, with an optional symbol: `lease/walk.py`, `config/sections/*.py`,
# `tests/foundation/x.py`, `config/`, `lease/host_journal.py:HostMemory.avoids`.
PATH = re.compile(r"(?P<path>[\w*][\w./*-]*(?:\.py|\.toml|\.md|/))(?::(?P<symbol>[\w.]+))?")
# A class, or a member of one: `LeaseLedger`, `FailureScope.HOST`, `RunSession.choose_model`.
CLASS = re.compile(r"[A-Z][a-z]\w*(?:\.\w+)?")
# A bare snake_case name (`order_by_memory`); prose words (`idle_stop`, a phase) are skipped
# unless shipped code defines a function of that name.
FUNCTION = re.compile(r"[a-z]\w*_\w*")


def glossary() -> str:
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    return text.split("\n## Glossary\n", 1)[1]


def cited() -> list[str]:
    # A code span may wrap a line: its words are joined by one space, as Markdown shows them.
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", glossary())]


def _resolve(path: str) -> list[Path]:
    found: list[Path] = []
    for root in (REPO, REPO / "mvp_tui"):
        found += [p for p in root.glob(path) if p.exists()] if "*" in path else (
            [root / path] if (root / path).exists() else []
        )
    return found


def _shipped_files() -> Iterator[Path]:
    yield from shipped_files()


@cache
def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in _shipped_files()}


@cache
def _used_names() -> frozenset[str]:
    """Every name shipped code reads: loaded names, attributes, and names imported."""
    used: set[str] = set()
    for tree in _trees().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                used.update(alias.name for alias in node.names)
    return frozenset(used)


def _members(node: ast.AST) -> set[str]:
    """Names a module or class body defines: functions, classes, assignments, fields."""
    names: set[str] = set()
    for item in getattr(node, "body", []):
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(item.name)
        elif isinstance(item, ast.Assign):
            names.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
    return names


def _classes(tree: ast.Module, name: str) -> list[ast.ClassDef]:
    return [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]


def _defined(tree: ast.Module, symbol: str) -> bool:
    head, _, member = symbol.partition(".")
    if not member:
        return head in _members(tree)
    return any(member in _members(cls) for cls in _classes(tree, head))


def test_the_glossary_cites_paths_and_names() -> None:
    tokens = cited()
    assert sum(bool(PATH.fullmatch(t)) for t in tokens) > 30
    assert sum(bool(CLASS.fullmatch(t)) for t in tokens) > 10


def test_no_cited_path_leaves_the_repository() -> None:
    outside = [t for t in cited() if t.startswith(("/", "~/")) or "../" in t]
    assert not outside, f"the glossary cites paths outside the repository: {outside}"


def test_every_cited_path_and_symbol_resolves() -> None:
    wrong: list[str] = []
    for token in cited():
        match = PATH.fullmatch(token)
        if not match:
            continue
        files = _resolve(match["path"])
        if not files:
            wrong.append(f"{token}: no such file or folder")
            continue
        symbol = match["symbol"]
        if symbol is None:
            continue
        trees = [ast.parse(f.read_text(encoding="utf-8")) for f in files if f.suffix == ".py"]
        if not any(_defined(tree, symbol) for tree in trees):
            wrong.append(f"{token}: {symbol} is not defined there")
        elif symbol.rpartition(".")[2] not in _used_names():
            wrong.append(f"{token}: no shipped code uses {symbol} (only tests?)")
    assert not wrong, "ARCHITECTURE.md's glossary: " + "; ".join(wrong)


def test_every_cited_class_and_function_is_live() -> None:
    wrong: list[str] = []
    for token in cited():
        if FUNCTION.fullmatch(token):
            defined = any(_defined(tree, token) for tree in _trees().values())
            if defined and token not in _used_names():
                wrong.append(f"{token}: no shipped code uses it (only tests?)")
            continue
        if not CLASS.fullmatch(token):
            continue
        if not any(_defined(tree, token) for tree in _trees().values()):
            wrong.append(f"{token}: no shipped class defines it")
        elif token.rpartition(".")[2] not in _used_names():
            wrong.append(f"{token}: no shipped code uses it")
    assert not wrong, "ARCHITECTURE.md's glossary: " + "; ".join(wrong)


def test_a_name_only_tests_call_is_caught() -> None:
    # order_by_memory, once defined in lease/host_journal.py and called only from tests (the
    # glossary cited it, bare, as what production does), is gone: engine/offer_ranking.py.
    tree = ast.parse((REPO / "mvp_tui/lease/host_journal.py").read_text(encoding="utf-8"))
    if _defined(tree, "order_by_memory"):
        assert FUNCTION.fullmatch("order_by_memory")
        assert "order_by_memory" not in _used_names()
    assert "avoids" in _used_names() and _defined(tree, "HostMemory.avoids")

"""The dashboard asks its mode (tui/run_mode.py: a run, a replay or the bare shell) and never
tests which one it is: no module of `mvp_tui/tui/` but the modes' own compares, or tests the
truth of, `self.replay`, `self.session`, `self.engine`, `self.controller`, `self.mode` or the
hub, nor of a local name bound to one of them (`session = self.session; if session is None`),
nor asks `isinstance` of one. Read from the source with `ast`, so the branches cannot come
back one by one.

`python -m tests.tui.test_mode_branches [ROOT]` prints each branch found under
ROOT/mvp_tui/tui (default: this checkout), with where.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What tells the modes apart: the app's handles on the run, the replay and the mode itself.
MODE_NAMES = frozenset({"replay", "session", "engine", "controller", "mode", "hub", "_hub"})
# The modes themselves: the one place that may tell them apart.
MODE_MODULES = frozenset({"run_mode.py"})
_COMPARE_OPS = (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)


def _mode_handle(node: ast.expr, aliases: set[str]) -> str | None:
    """`self.NAME` (NAME one of MODE_NAMES), or a local bound to one: what it names."""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr in MODE_NAMES
    ):
        return f"self.{node.attr}"
    if isinstance(node, ast.Name) and node.id in aliases:
        return node.id
    return None


def _aliases(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Locals bound to a mode handle in this function (`session = self.session`, also in a
    tuple: `endpoint, session = ..., self.session`)."""
    out: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign | ast.NamedExpr):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                pairs: list[tuple[ast.expr, ast.expr]] = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts, strict=False))
                for name, value in pairs:
                    if isinstance(name, ast.Name) and _mode_handle(value, set()) is not None:
                        out.add(name.id)
    return out


def _tested(node: ast.AST) -> Iterator[ast.expr]:
    """The expressions whose truth a statement or expression branches on."""
    if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
        yield node.test
    elif isinstance(node, ast.BoolOp):
        yield from node.values
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node.operand
    elif isinstance(node, ast.comprehension):
        yield from node.ifs


def branches(source: str, path: str) -> list[str]:
    """`path:line what` for each test of a mode handle in this module's functions."""
    found: set[tuple[int, str]] = set()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        aliases = _aliases(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Compare) and any(
                isinstance(op, _COMPARE_OPS) for op in node.ops
            ):
                for side in [node.left, *node.comparators]:
                    if (handle := _mode_handle(side, aliases)) is not None:
                        found.add((node.lineno, f"compares {handle}"))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and node.args
                and (handle := _mode_handle(node.args[0], aliases)) is not None
            ):
                found.add((node.lineno, f"isinstance of {handle}"))
            for test in _tested(node):
                if (handle := _mode_handle(test, aliases)) is not None:
                    found.add((test.lineno, f"tests the truth of {handle}"))
    return [f"{path}:{line} {what}" for line, what in sorted(found)]


def tui_branches(root: Path) -> list[str]:
    out: list[str] = []
    for path in sorted((root / "mvp_tui" / "tui").glob("*.py")):
        if path.name in MODE_MODULES:
            continue
        out += branches(path.read_text(encoding="utf-8"), str(path.relative_to(root)))
    return out


def test_the_dashboard_asks_its_mode_instead_of_testing_which_it_is() -> None:
    assert (ROOT / "mvp_tui" / "tui" / "run_mode.py").is_file()  # the modes are still there
    assert tui_branches(ROOT) == []


def test_the_scan_catches_each_kind_of_branch() -> None:
    source = """
class App:
    def a(self):
        if self.replay is not None:
            pass
        return 1 if self.session else 2

    def b(self):
        endpoint, session = self.endpoint, self.session
        if endpoint is None or session is None:
            return
        assert self.engine
        if not self.controller and isinstance(self.mode, object):
            pass
        x = [p for p in self.panes if self.hub]

    def c(self):
        self.mode.start(self)  # asking the mode is no branch
        if self.board is None:  # nor is testing something that is not a mode handle
            return
        return self.session.engine if self.ready else None
"""
    assert branches(source, "x.py") == [
        "x.py:4 compares self.replay",
        "x.py:6 tests the truth of self.session",
        "x.py:10 compares session",
        "x.py:12 tests the truth of self.engine",
        "x.py:13 isinstance of self.mode",
        "x.py:13 tests the truth of self.controller",
        "x.py:15 tests the truth of self.hub",
    ]


def main(root: Path) -> None:
    found = tui_branches(root)
    for line in found:
        print(line)
    print(f"mode branches in {root}/mvp_tui/tui (outside {', '.join(sorted(MODE_MODULES))}): "
          f"{len(found)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)

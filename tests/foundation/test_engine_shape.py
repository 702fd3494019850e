"""The core stays composed: no attribute of an engine class is assigned by two classes of
one object's inheritance chain (each attribute is its owner's; another collaborator asks the
owner to change it), and the run context changes only through its own methods. Read from
the source with `ast`. (How much a class restates its collaborators is
tests/foundation/test_forwards.py's.)

`python -m tests.foundation.test_engine_shape [ROOT]` prints the attributes rebound across a
chain in ROOT/mvp_tui/engine (default: this checkout), with where.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mvp_tui.engine.context import RunContext
from tests.foundation.classes import ClassInfo, Known, Method, chain, classes_of, classes_under

ROOT = Path(__file__).resolve().parents[2]


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _flat(target)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        yield from _flat(node.target)


def _flat(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        for item in target.elts:
            yield from _flat(item)
    else:
        yield target


def _self_assigns(method: Method) -> Iterator[tuple[str, int]]:
    if not method.args.args:
        return
    me = method.args.args[0].arg  # `self`, whatever it is called
    for node in ast.walk(method):
        for target in _targets(node):
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == me
            ):
                yield target.attr, target.lineno


def assigns(cls: ClassInfo) -> dict[str, list[str]]:
    """attribute → path:line of each `self.X = …` in a method of the class."""
    path = cls.where.split(":")[0]
    found: dict[str, list[str]] = {}
    for method in cls.methods:
        for attr, line in _self_assigns(method):
            found.setdefault(attr, []).append(f"{path}:{line}")
    return found


def rebound(info: ClassInfo, known: Known) -> list[str]:
    """`attr: where, where` for each attribute assigned by more than one class of the chain."""
    owners: dict[str, list[tuple[ClassInfo, list[str]]]] = {}
    for cls in chain(info, known):
        for attr, where in assigns(cls).items():
            owners.setdefault(attr, []).append((cls, where))
    return [
        f"{info.name}.{attr} assigned in {len(by)} classes: "
        + ", ".join(f"{c.name} ({', '.join(where)})" for c, where in by)
        for attr, by in sorted(owners.items())
        if len(by) > 1
    ]


def engine_classes(root: Path) -> tuple[list[ClassInfo], Known]:
    return classes_under(root, "mvp_tui/engine/")


def test_no_attribute_is_assigned_outside_its_owner() -> None:
    engine, known = engine_classes(ROOT)
    names = {c.where.split(":")[0] + " " + c.name for c in engine}
    assert {"mvp_tui/engine/run.py RunEngine", "mvp_tui/engine/run_bringup.py NodeLink",
            "mvp_tui/engine/run_serve.py Serving"} <= names
    offenders = [line for c in engine for line in rebound(c, known)]
    assert offenders == []


def test_the_run_context_changes_only_through_its_own_methods() -> None:
    fields = {f.name for f in dataclasses.fields(RunContext)}
    assert {"run_id", "settings", "hub", "sink", "redactor", "store", "clock"} <= fields
    assert RunContext.__dataclass_params__.frozen  # type: ignore[attr-defined]
    engine, _ = engine_classes(ROOT)
    context = next(c for c in engine if c.name == "RunContext")
    assert context.where.startswith("mvp_tui/engine/context.py")


def test_the_guard_catches_an_attribute_rebound_by_a_subclass() -> None:
    source = """
class Base:
    def __init__(self):
        self.shared = 1
        self.mine = 2

class Child(Base):
    def later(self):
        self.a, self.shared = 1, 2
"""
    known = {c.name: [c] for c in classes_of(source, "x.py")}
    child, base = known["Child"][0], known["Base"][0]
    assert rebound(child, known) == [
        "Child.shared assigned in 2 classes: Child (x.py:9), Base (x.py:4)"
    ]
    assert rebound(base, known) == []


def test_a_frozen_context_refuses_a_field_set_from_outside() -> None:
    # Any collaborator's `ctx.run_id = …` fails at once: RunContext rebinds its own.
    engine_ctx = object.__new__(RunContext)
    with pytest.raises(dataclasses.FrozenInstanceError):
        engine_ctx.run_id = "elsewhere"  # type: ignore[misc]


def main(root: Path) -> None:
    engine, known = engine_classes(root)
    lines = [line for c in engine for line in rebound(c, known)]
    attrs = {line.split(" assigned")[0].split(".", 1)[1] for line in lines}
    print(f"attributes assigned by more than one class of a chain: {len(attrs)}")
    for line in lines:
        print("  " + line)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)

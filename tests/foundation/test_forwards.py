"""Commands down, facts up: no class of `mvp_tui/engine/` or `mvp_tui/tui/` holds more than
three one-line forwards, members whose whole body (a docstring aside) hands the call on to a
collaborator:

    return self.<collab>.<name>            (a property or a read)
    return self.<collab>.<name>(...)       (`await` or not)
    self.<collab>.<name>(...)              (`await` or not)

The arguments of a forwarded call are only passed on (names, dotted names, literals): a member
that builds what it sends (a message for a pane, a computed value) translates, and is not one.
A caller that needs the collaborator reaches it (`engine.leasing.lease(...)`), rather than a
façade restating its methods one by one. Members a class inherits from project classes count
(a mixin of forwards is still the class's), and one it overrides counts as its own.

`python -m tests.foundation.test_forwards [ROOT]` prints every class with a forward, most
first, and each forward with where.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

from tests.foundation.classes import ClassInfo, Known, Method, chain, classes_of, classes_under
from tests.shipped import ROOT

MAX_FORWARDS = 3
CHECKED = ("mvp_tui/engine/", "mvp_tui/tui/")


@dataclasses.dataclass
class Forward:
    member: str
    where: str  # path:line of the member's def
    to: str  # what it hands on to, e.g. `self.leasing.lease(...)`


def _body(func: Method) -> list[ast.stmt]:
    body = func.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]  # the docstring
    return body


def _collab_chain(node: ast.expr, me: str) -> bool:
    """`self.<collab>.<name>` (or deeper): an attribute of an attribute of `self`."""
    if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Attribute):
        return False
    inner: ast.expr = node.value
    while isinstance(inner, ast.Attribute):
        inner = inner.value
    return isinstance(inner, ast.Name) and inner.id == me


def _passed_on(node: ast.expr) -> bool:
    """An argument a forward only passes on: a name, a dotted name (`self.run_id`,
    `LogStream.PROVIDER`), a literal, or a starred one of those. A member that builds its
    argument (a message, a sum, a call) translates rather than forwards."""
    if isinstance(node, ast.Starred):
        node = node.value
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name | ast.Constant)


def forward_of(func: Method, path: str) -> Forward | None:
    """The member's forward, if its body is one: see the module's docstring for the shapes."""
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in func.decorator_list)
    if static or not func.args.args:
        return None  # no `self` to forward through
    me = func.args.args[0].arg
    body = _body(func)
    if len(body) != 1 or not isinstance(body[0], ast.Return | ast.Expr):
        return None
    value = body[0].value
    if value is None:
        return None
    if isinstance(value, ast.Await):
        value = value.value
    if isinstance(value, ast.Call):
        passed = [*value.args, *(k.value for k in value.keywords)]
        if not all(_passed_on(arg) for arg in passed):
            return None
        target = value.func
        shown = f"{ast.unparse(target)}(...)"
    elif isinstance(body[0], ast.Return):
        target = value
        shown = ast.unparse(target)
    else:
        return None  # a bare attribute as a statement does nothing
    if not _collab_chain(target, me):
        return None
    return Forward(func.name, f"{path}:{func.lineno}", shown)


def forwards(info: ClassInfo, known: Known) -> list[Forward]:
    """The class's forwards, inherited ones included; the nearest definition of a name wins."""
    decided: dict[str, Forward | None] = {}
    for cls in chain(info, known):
        path = cls.where.split(":")[0]
        for method in cls.methods:  # a property's getter before its setter
            decided.setdefault(method.name, forward_of(method, path))
    return [f for f in decided.values() if f is not None]


def checked_classes(root: Path) -> tuple[list[ClassInfo], Known]:
    return classes_under(root, *CHECKED)


def over_cap(info: ClassInfo, known: Known) -> str | None:
    found = forwards(info, known)
    if len(found) <= MAX_FORWARDS:
        return None
    listed = "; ".join(f"{f.member} ({f.where}) → {f.to}" for f in found)
    return f"{info.name} ({info.where}): {len(found)} forwards: {listed}"


def test_no_engine_or_tui_class_has_more_than_three_forwards() -> None:
    checked, known = checked_classes(ROOT)
    names = {c.name for c in checked}
    assert {"RunEngine", "RunController", "NodeLink", "Leasing", "Serving"} <= names
    over = [line for c in checked for line in [over_cap(c, known)] if line]
    assert over == [], "reach the collaborator instead of forwarding to it:\n" + "\n".join(over)


SNIPPET = '''
class Facade:
    def __init__(self, link):
        self.link = link

    @property
    def endpoint(self):
        return self.link.endpoint

    def close(self, hard):
        """Close the link."""
        return self.link.close(hard)

    async def bring_up(self, timeout):
        return await self.link.bring_up(timeout)

    async def stop(self):
        await self.link.stop()

    def log(self, line):
        self.ctx.log.write(Stream.PROVIDER, line, *more, end="", **rest)

    def deep(self):
        return self.ctx.settings.limits

    def own(self):
        return self.value                  # its own attribute: not a forward

    def two(self):
        self.link.stop()
        self.link.start()

    def computed(self):
        return self.link.price * 2

    def routed(self, event):
        self.pane.post_message(Step(event))  # builds a message: translates

    def priced(self, hours):
        return self.link.cost(hours * 2)

    def local(self, other):
        return other.link.stop()

    @staticmethod
    def helper(thing):
        return thing.a.b()


class Child(Facade):
    def own(self):
        return self.link.value              # overrides a non-forward with one

    def endpoint(self):
        return compute(self.link.endpoint)  # overrides a forward with real work
'''


def test_the_detector_finds_each_shape_of_forward() -> None:
    known = {c.name: [c] for c in classes_of(SNIPPET, "x.py")}
    facade, child = known["Facade"][0], known["Child"][0]
    found = {f.member: (f.where, f.to) for f in forwards(facade, known)}
    assert found == {
        "endpoint": ("x.py:7", "self.link.endpoint"),
        "close": ("x.py:10", "self.link.close(...)"),
        "bring_up": ("x.py:14", "self.link.bring_up(...)"),
        "stop": ("x.py:17", "self.link.stop(...)"),
        "log": ("x.py:20", "self.ctx.log.write(...)"),
        "deep": ("x.py:23", "self.ctx.settings.limits"),
    }
    # Inherited forwards count; an override decides for its name.
    assert {f.member for f in forwards(child, known)} == {
        "close", "bring_up", "stop", "log", "deep", "own",
    }
    line = over_cap(facade, known)
    assert line is not None and line.startswith("Facade (x.py:2): 6 forwards: endpoint (x.py:7)")
    assert "bring_up (x.py:14) → self.link.bring_up(...)" in line


def test_three_forwards_pass_and_a_fourth_fails() -> None:
    def members(n: int) -> str:
        one = "    def m{0}(self):\n        return self.collab.m{0}()\n"
        return "".join(one.format(i) for i in range(n))

    three = classes_of("class Three:\n" + members(3), "y.py")[0]
    four = classes_of("class Four:\n" + members(4), "y.py")[0]
    assert len(forwards(three, {"Three": [three]})) == 3
    assert over_cap(three, {"Three": [three]}) is None
    assert over_cap(four, {"Four": [four]}) is not None


def main(root: Path) -> None:
    checked, known = checked_classes(root)
    for c in sorted(checked, key=lambda c: -len(forwards(c, known))):
        found = forwards(c, known)
        if not found:
            continue
        print(f"{len(found):3d} forwards  {c.name}  {c.where}")
        for f in found:
            print(f"      {f.member:24s} {f.where:40s} {f.to}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)

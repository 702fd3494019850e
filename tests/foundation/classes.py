"""The shipped classes as `ast` reads them, and the project classes each inherits from: what
the engine-shape guard (attributes) and the forward detector (members) read."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from tests.shipped import shipped_files

Method = ast.FunctionDef | ast.AsyncFunctionDef


@dataclasses.dataclass
class ClassInfo:
    name: str
    where: str  # path:line of the class statement
    bases: list[str]
    methods: list[Method]  # its own, in source order (a property's setter after its getter)


def classes_of(source: str, path: str) -> list[ClassInfo]:
    found: list[ClassInfo] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
            methods = [item for item in node.body if isinstance(item, Method)]
            found.append(ClassInfo(node.name, f"{path}:{node.lineno}", bases, methods))
    return found


Known = dict[str, list[ClassInfo]]  # every shipped class, by name (names repeat)


def project_classes(root: Path) -> Known:
    known: Known = {}
    for path in shipped_files(under=root):
        rel = str(path.relative_to(root))
        for info in classes_of(path.read_text(encoding="utf-8"), rel):
            known.setdefault(info.name, []).append(info)
    return known


def classes_under(root: Path, *folders: str) -> tuple[list[ClassInfo], Known]:
    """The classes defined under `folders` (e.g. "mvp_tui/engine/"), with every shipped one."""
    known = project_classes(root)
    mine = [c for cs in known.values() for c in cs if c.where.startswith(folders)]
    return sorted(mine, key=lambda c: c.where), known


def _base(name: str, of: ClassInfo, known: Known) -> ClassInfo | None:
    """A base by name: the one of the same module, else the first shipped one."""
    found = known.get(name.rsplit(".", 1)[-1], [])
    same = [c for c in found if c.where.split(":")[0] == of.where.split(":")[0]]
    return (same or found or [None])[0]


def chain(info: ClassInfo, known: Known) -> list[ClassInfo]:
    """The class and the project classes it inherits from (breadth first, each once)."""
    out: list[ClassInfo] = []
    todo = [info]
    while todo:
        here = todo.pop(0)
        if any(x is here for x in out):
            continue
        out.append(here)
        todo += [b for b in (_base(n, here, known) for n in here.bases) if b is not None]
    return out

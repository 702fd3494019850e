"""Every configuration key is read: as a typed settings attribute (`settings.ssh.x`), or by
its name in the config package itself (`values["..."]`), somewhere in the shipped code
outside its declaration, or marked inert (a seed key accepted and not built, which the loader
reads to warn, see tests/seed/test_seed_config.py). A key nothing reads is implemented or
removed."""

from __future__ import annotations

import ast
from pathlib import Path

from mvp_tui.config.schema import KEYS, SECTION_CLASSES
from tests.shipped import shipped_files

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ROOT / "mvp_tui" / "config" / "sections"
# A provider's section read as `settings.of(VastaiSection)`: the class names its section.
_BY_CLASS = {cls.__name__: cls.NAME for cls in SECTION_CLASSES}


def _declares(path: Path) -> bool:
    """A section's own file (the config's, or a provider package's `section.py`)."""
    return SECTIONS in path.parents or (path.name == "section.py" and "providers" in path.parts)


def _named_in_reads(tree: ast.AST) -> set[str]:
    """String constants anywhere inside call arguments or subscripts (a getter's key), and
    `.section.key` attribute reads as "section.key"."""
    names: set[str] = set()
    for node in ast.walk(tree):
        # A section read as `settings.x` (often bound to a name first, `vast = ...vastai`)
        # and any attribute `.y`: "x.*" and "*.y", which together make "x.y" read.
        if isinstance(node, ast.Attribute):
            names.add(f"*.{node.attr}")
            if isinstance(node.value, ast.Attribute) and node.value.attr == "settings":
                names.add(f"{node.attr}.*")
        parts: list[ast.AST] = []
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "of"
            and [type(a) for a in node.args] == [ast.Name]
        ):
            section = _BY_CLASS.get(node.args[0].id)  # type: ignore[attr-defined]
            if section:
                names.add(f"{section}.*")
        if isinstance(node, ast.Call):
            parts = [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.Subscript):
            parts = [node.slice]
        for part in parts:
            for inner in ast.walk(part):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    names.add(inner.value)
    return names


def _reads() -> set[str]:
    names: set[str] = set()
    for path in shipped_files():
        if not _declares(path):
            names |= _named_in_reads(ast.parse(path.read_text(encoding="utf-8")))
    return names


def test_every_key_is_read_or_declared_inert() -> None:
    reads = _reads()
    unread = [
        spec.dotted
        for spec in KEYS
        if not spec.inert
        and spec.dotted not in reads
        and not {f"{spec.section}.*", f"*.{spec.name}"} <= reads
    ]
    assert not unread, (
        f"keys nothing reads (implement them, or remove them and their example): {unread}"
    )


def test_the_scan_sees_the_ways_a_key_is_read() -> None:
    source = (
        'a = config.require_float("ssh.x")\nb = _get(config, "docker.y")\n'
        'c = config["z.w"]\nd = f(p if q else "v.u")\ne = "not.read"\n'
        "f = config.settings.prompt.stall_secs\ng = config.settings.of(VastaiSection)\n"
    )
    assert _named_in_reads(ast.parse(source)) >= {
        "ssh.x", "docker.y", "z.w", "v.u", "prompt.*", "*.stall_secs", "vastai.*"
    }
    assert "not.read" not in _named_in_reads(ast.parse(source))

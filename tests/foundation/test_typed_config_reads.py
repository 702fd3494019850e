"""Nothing outside mvp_tui/config/ reads a config key by its name as a string: every reader
takes the typed settings (`config.settings.prompt.stall_secs`), so mypy checks each read
and a key is declared once, on its field (mvp_tui/config/sections/)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mvp_tui.config.schema import SECTIONS
from tests.shipped import shipped_files

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "mvp_tui" / "config"
GETTER = re.compile(r"^(get|require)_[a-z_]+$")
DOTTED = re.compile(r"^[a-z_]+\.[a-z0-9_]+$")  # "section.key", not e.g. a hash's name


def _string_keyed_reads(tree: ast.AST) -> list[int]:
    """Lines of `x.get_*("…")` / `x.require_*("…")` calls whose first argument is a dotted
    key's text (or an f-string, which could build one), and of `x["section.key"]`."""
    return [node.lineno for node in ast.walk(tree) if _getter_read(node) or _subscript_read(node)]


def _getter_read(node: ast.AST) -> bool:
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and GETTER.match(node.func.attr)
        and node.args
    ):
        return False
    first = node.args[0]
    if isinstance(first, ast.JoinedStr):
        return True
    return isinstance(first, ast.Constant) and isinstance(first.value, str) and bool(
        DOTTED.match(first.value)
    )


def _subscript_read(node: ast.AST) -> bool:
    """config["section.key"], config.values["section.key"] (not a source lookup, nor a
    record's copy being written)."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and not _is_sources(node.value)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
        and bool(DOTTED.match(node.slice.value))
        and node.slice.value.split(".")[0] in SECTIONS  # not e.g. a tensor's name
    )


def test_no_string_keyed_config_read_outside_config() -> None:
    found = []
    for path in shipped_files():
        if CONFIG in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{line}" for line in _string_keyed_reads(tree)]
    assert not found, "string-keyed config reads (use config.settings.<section>.<key>): " + (
        ", ".join(found)
    )


def test_the_scan_sees_a_string_keyed_read() -> None:
    source = (
        'a = config.require_float("ssh.x")\nb = self.config.get_str(f"{s}.y")\n'
        "c = config.settings.ssh.retry_max_secs\nd = config.get_path(name)\n"
        'e = key.get_fingerprint("sha256")\nf = config["ssh.x"]\ng = config.values["ui.b"]\n'
        'h = config.sources["ssh.x"]\ni = headers["content-type"]\nj = out["token.weight"]\n'
    )
    assert sorted(_string_keyed_reads(ast.parse(source))) == [1, 2, 6, 7]


def _source_lookups(tree: ast.AST) -> list[tuple[int, str]]:
    """`x.sources["…"]` / `x.sources.get("…")`: where a value came from, for a message."""
    found = []
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript) and _is_sources(node.value):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and _is_sources(node.func.value)
            and node.args
        ):
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append((node.lineno, key.value))
    return found


def _is_sources(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "sources"


def test_every_source_lookup_names_a_declared_key() -> None:
    """Provenance is still looked up by the key's name (for messages naming where a value
    came from): each such name must be a declared key, so a renamed key fails here."""
    from mvp_tui.config.schema import BY_DOTTED

    wrong = []
    for path in shipped_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        wrong += [
            f"{path.relative_to(ROOT)}:{line} {name!r}"
            for line, name in _source_lookups(tree)
            if name not in BY_DOTTED
        ]
    assert not wrong, "source lookups of undeclared keys: " + ", ".join(wrong)


def test_the_source_scan_sees_both_forms() -> None:
    source = 'a = config.sources["ssh.x"]\nb = self.config.sources.get("y.z", "d")\n'
    assert _source_lookups(ast.parse(source)) == [(1, "ssh.x"), (2, "y.z")]

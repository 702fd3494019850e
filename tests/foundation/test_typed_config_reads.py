"""Nothing outside mvp_tui/config/ reads a config key by its name as a string: every reader
takes the typed settings (`config.settings.prompt.stall_secs`), so mypy checks each read
and a key is declared once, on its field (mvp_tui/config/sections/)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("mvp_tui", "providers", "widgets")
CONFIG = ROOT / "mvp_tui" / "config"
GETTER = re.compile(r"^(get|require)_[a-z_]+$")
DOTTED = re.compile(r"^[a-z_]+\.[a-z0-9_]+$")  # "section.key", not e.g. a hash's name


def _string_keyed_reads(tree: ast.AST) -> list[int]:
    """Lines of `x.get_*("…")` / `x.require_*("…")` calls whose first argument is a dotted
    key's text (or an f-string, which could build one)."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and GETTER.match(node.func.attr)
            and node.args
            and (
                isinstance(node.args[0], ast.JoinedStr)
                or (
                    isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and DOTTED.match(node.args[0].value)
                )
            )
        ):
            lines.append(node.lineno)
    return lines


def test_no_string_keyed_config_read_outside_config() -> None:
    found = []
    for top in SHIPPED:
        for path in sorted((ROOT / top).rglob("*.py")):
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
        'e = key.get_fingerprint("sha256")\n'
    )
    assert _string_keyed_reads(ast.parse(source)) == [1, 2]

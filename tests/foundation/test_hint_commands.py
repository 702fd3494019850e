"""Every hint that names an `mvp-tui` command names one that exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mvp_tui.cli import COMMANDS
from tests.shipped import shipped_files

REPO = Path(__file__).resolve().parents[2]
# The installed package: mvp_tui plus the subpackages that live at the top of the repo.
# `mvp-tui WORD` inside backticks is how messages, help texts and docstrings name a command.
COMMAND_REF = re.compile(r"`mvp-tui ([^`\s]+)")
REAL = {*COMMANDS, "config"}


def _string_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def _named_commands() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in shipped_files():
        for line, text in _string_literals(path):
            for word in COMMAND_REF.findall(text):
                found.append((f"{path.relative_to(REPO)}:{line}", word))
    return found


def test_the_scan_finds_the_hints() -> None:
    # The scan itself works: the package names its commands in many places.
    words = {word for _, word in _named_commands()}
    assert {"ls", "down", "config", "offers"} <= words


def test_every_command_a_hint_names_exists() -> None:
    wrong = [
        f"{where}: `mvp-tui {word}`"
        for where, word in _named_commands()
        if word not in REAL and not word.startswith("-")
    ]
    assert not wrong, f"not commands of mvp-tui ({', '.join(sorted(REAL))}): {wrong}"


def test_the_readme_and_the_docs_name_real_commands() -> None:
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    wrong = sorted(
        f"{page.relative_to(REPO)}: `mvp-tui {word}`"
        for page in pages
        if page.exists()
        for word in set(COMMAND_REF.findall(page.read_text(encoding="utf-8")))
        if word not in REAL and word[0] != "-"
    )
    assert not wrong, wrong

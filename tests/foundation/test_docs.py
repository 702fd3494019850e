"""The README is the front door (under 200 lines, the two commands CI and users run, links that
resolve), the docs site's pages are all in its nav and its screenshots are snapshots that
exist, and every command's --help ends with the docs page and heading that cover it.
`mkdocs build --strict` (scripts/test.sh) checks the site's own links and anchors."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from mvp_tui.cli import COMMANDS, build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
MAX_README_LINES = 200


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move the detail to a "
        "page under docs/ and link it"
    )
    text = "\n".join(lines)
    # The two commands, exactly as users and CI (.ci/run -> scripts/test.sh) run them.
    assert "\n./scripts/run.sh\n" in text and "\n./scripts/test.sh\n" in text
    assert "scripts/test.sh" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "pipx install" in text and "uv tool install" in text


def test_the_readmes_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links its pages"
    missing = [
        t for t in local
        if not (REPO / t.replace("%5B", "[").replace("%5D", "]")).exists()
    ]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def _nav_pages() -> set[str]:
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return set(re.findall(r"([\w/-]+\.md)\s*$", nav, flags=re.M))


def test_every_docs_page_is_in_the_nav() -> None:
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    nav = _nav_pages()
    assert pages - nav == set(), f"pages under docs/ missing from mkdocs.yml's nav: {pages - nav}"
    assert nav - pages == set(), f"nav entries with no page: {nav - pages}"


def test_the_screenshots_are_snapshots_that_exist() -> None:
    hook = REPO / "docs_hooks" / "screenshots.py"
    tree = ast.parse(hook.read_text(encoding="utf-8"))
    (table,) = [
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(isinstance(t, ast.Name) and t.id == "SCREENSHOTS"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
    ]
    shots = ast.literal_eval(table)
    snapshots = REPO / "tests" / "tui" / "__snapshots__"
    assert [name for name in shots.values() if not (snapshots / name).is_file()] == []
    used = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    assert [site for site in shots if site not in used] == [], "a screenshot no page shows"
    assert not list(DOCS.rglob("*.svg")), "screenshots come from the snapshots, not copies"


def _epilogs() -> dict[str, str]:
    parser = build_parser()
    found = {"": parser.epilog or ""}
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for name, sub in action.choices.items():
            found[name] = sub.epilog or ""
    return found


def _heading_ids(page: Path) -> set[str]:
    """The ids of the page's headings as the site builds them (Python-Markdown's toc and
    attr_list, mkdocs.yml's extensions)."""
    markdown = _markdown()
    html = markdown.markdown(
        page.read_text(encoding="utf-8"), extensions=["attr_list", "toc", "tables", "fenced_code"]
    )
    return set(re.findall(r'<h[1-6][^>]* id="([^"]+)"', html))


def _markdown():  # type: ignore[no-untyped-def]
    try:
        import markdown
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("the docs extra is not installed (./scripts/setup.sh dev local docs)")
    return markdown


def test_every_commands_help_ends_with_its_docs_page() -> None:
    epilogs = _epilogs()
    assert set(epilogs) == {"", "config", *COMMANDS}
    for command, epilog in epilogs.items():
        last = epilog.strip().splitlines()[-1]
        match = re.fullmatch(r"docs: (docs/[\w/-]+\.md)(?:#([\w-]+))?(?: .*)?", last)
        assert match, f"`mvp-tui {command} --help` does not end with a docs line: {last!r}"
        page, anchor = REPO / match[1], match[2]
        assert page.is_file(), f"{command}: {match[1]} does not exist"
        if command:
            assert anchor, f"`mvp-tui {command} --help` names no heading of {match[1]}"
        if anchor:
            assert anchor in _heading_ids(page), f"{match[1]} has no heading #{anchor}"

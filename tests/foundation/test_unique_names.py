"""Names that don't collide: a class name means one thing across the shipped packages, and
two modules do not share a path's meaning (the issue-14 renames stay renamed)."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

from tests.shipped import shipped_files

ROOT = Path(__file__).resolve().parents[2]
# The node agent runs alone on a node (standard library only), so its package keeps its own
# twins of the app's classes where it cannot import them (ConfigError).
ALONE = ROOT / "mvp_tui" / "node"
# Twins that remain, each private to its module or a small local record; shrink this list.
KNOWN_TWINS = frozenset({"Tail", "_Live", "Stage", "_Lease", "Answer"})


def _classes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in shipped_files():
        if path.is_relative_to(ALONE):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                found[node.name].append(str(path.relative_to(ROOT)))
    return found


def test_each_class_name_is_defined_once() -> None:
    twins = {name: paths for name, paths in _classes().items() if len(paths) > 1}
    unexpected = {name: paths for name, paths in twins.items() if name not in KNOWN_TWINS}
    assert not unexpected, f"one class name, two meanings; rename one: {unexpected}"


def test_the_renamed_names_each_mean_one_thing() -> None:
    classes = _classes()
    for name, home in {
        "AttemptOutcome": "mvp_tui/ssh/events.py",
        "CreateAttemptOutcome": "mvp_tui/lease/records.py",
        "LeaseState": "providers/base.py",
        "LeaseDisplayState": "widgets/leases_model.py",
        "Frame": "mvp_tui/datastream/frame.py",
        "HelperFrame": "mvp_tui/ssh/logtail.py",
    }.items():
        assert classes[name] == [home], (name, classes[name])
    for gone in (
        "mvp_tui/lease/host_keys.py",
        "mvp_tui/engine/providers.py",
        "mvp_tui/config/keys.py",
    ):
        assert not (ROOT / gone).exists(), f"{gone} was renamed; its twin name collides"


def test_the_test_helpers_exist_once() -> None:
    """One awaitable sink and one widget harness for every suite."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and node.name in ("WaitingSink", "Harness"):
                found[node.name].append(str(path.relative_to(ROOT)))
    assert found == {
        "WaitingSink": ["tests/prompt/waiting.py"],
        "Harness": ["tests/widgets/harness.py"],
    }

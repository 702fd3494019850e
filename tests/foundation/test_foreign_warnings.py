"""Warnings raised inside mvp-tui's dependencies never reach the terminal; mvp-tui's own still
do, and so does every warning when the person asks for them (`-W`, PYTHONWARNINGS). The filter
names every package of the dependency closure."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from mvp_tui.foreign_warnings import FOREIGN_PACKAGES
from tests.stderr_lines import foreign_lines

# Raised at exit, after the command's own work: the filter `main()` installed is still in place.
SITECUSTOMIZE = """\
import atexit, warnings

def _planted():
    warnings.warn_explicit("PLANTED-FOREIGN", UserWarning, "/x/site-packages/asyncssh/p.py", 7,
                           module="asyncssh.planted", registry={})
    warnings.warn_explicit("PLANTED-OURS", UserWarning, "mvp_tui/planted.py", 9,
                           module="mvp_tui.planted", registry={})

atexit.register(_planted)
"""


def _config_run(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "config.toml").write_text("")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MVP_", "VAST", "PYTHONWARNINGS"))}
    env.update({"PYTHONPATH": str(site), "MVP_STATE_DIR": str(tmp_path / "state"),
                "MVP_CONFIG": str(tmp_path / "config.toml"), **extra})
    return subprocess.run([sys.executable, "-m", "mvp_tui", "config"], capture_output=True,
                          text=True, env=env, timeout=60, check=True)


def test_a_dependencys_warning_is_quiet_and_ours_shows(tmp_path: Path) -> None:
    err = _config_run(tmp_path).stderr
    assert "PLANTED-OURS" in err, err  # the planted module loaded, and our warnings show
    assert "PLANTED-FOREIGN" not in err, err


def test_every_warning_shows_when_the_person_asks_for_them(tmp_path: Path) -> None:
    err = _config_run(tmp_path, PYTHONWARNINGS="default").stderr
    assert "PLANTED-OURS" in err and "PLANTED-FOREIGN" in err, err
    assert foreign_lines(err), "the foreign record is recognised as foreign"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(root: str, extras: tuple[str, ...]) -> list[md.Distribution]:
    seen: dict[str, md.Distribution] = {}
    todo = [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        if _norm(name) in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # an extra not installed here (e.g. `local` on a laptop)
        seen[_norm(name)] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            marker = req.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in wanted or ("",)):
                todo.append((req.name, tuple(req.extras)))
    return [d for key, d in seen.items() if key != "mvp-tui"]


def _import_names(dist: md.Distribution) -> set[str]:
    top = dist.read_text("top_level.txt")
    names = set(top.split()) if top else {
        str(f).split("/")[0].split(".")[0] for f in dist.files or []
        if not str(f).startswith("..") and ".dist-info" not in str(f).split("/")[0]
    }
    # A folder of data a wheel puts at the top (llama-cpp-python's `include`, `lib`) imports
    # as a namespace package with no code: nothing there can warn.
    return {n for n in names if n.isidentifier() and _has_code(n)}


def _has_code(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.origin not in (None, "namespace")


def test_the_filter_names_every_package_mvp_tui_runs_on() -> None:
    closure = _closure("mvp-tui", ("local",))
    if not any(_norm(d.metadata["Name"]) == "asyncssh" for d in closure):
        pytest.fail("mvp-tui's dependencies are not installed in this environment")
    missing = {
        d.metadata["Name"]: sorted(_import_names(d) - set(FOREIGN_PACKAGES)) for d in closure
    }
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, (
        f"dependencies whose warnings would reach the terminal: {missing}; add their import "
        "names to FOREIGN_PACKAGES in mvp_tui/foreign_warnings.py"
    )

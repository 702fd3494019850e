"""Start-up imports only what the command needs: the quick commands load no UI, SSH or HTTP.

Each command runs as a real subprocess under `python -X importtime`, whose report names every
module the process imported; the heavy libraries must not be among them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.pty_dashboard import PtyDashboard

FOOTER_KEY = " palette\x1b"  # the footer's last key label, as drawn (the last row painted)
HEAVY = ("textual", "asyncssh", "httpx")
AFTER_PAINT = ("markdown_it", "pygments", "http")  # the answer's markdown; the agent's HTTP


def imported_modules(*args: str, env: dict[str, str] | None = None) -> set[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST", "RUNPOD"))}
    base.update(env or {})
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        env=base,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "mvp_tui.cli" in modules  # the report is the one we think it is
    return modules


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".", 1)[0] in HEAVY)


def test_version_imports_no_ui_ssh_or_http() -> None:
    assert heavy_in(imported_modules("-m", "mvp_tui", "--version")) == []


@pytest.mark.parametrize("command", [("config",), ("ls",), ("ls", "--json")])
def test_config_and_ls_import_no_ui_ssh_or_http(command: tuple[str, ...], tmp_path: Path) -> None:
    env = {"MVP_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert heavy_in(imported_modules("-m", "mvp_tui", *command, env=env)) == []


def test_the_check_sees_heavy_imports() -> None:
    """The report read as above does name them when they load."""
    modules = imported_modules("-c", "import mvp_tui.cli, asyncssh, httpx, textual.app")
    assert {"asyncssh", "httpx", "textual", "textual.app"} <= set(heavy_in(modules))


def test_dashboard_paints_before_loading_ssh_or_http(tmp_path: Path) -> None:
    """The dashboard in a terminal: every module imported before its footer is first drawn
    precedes it in the terminal's byte stream (import reports and screen share the pty).
    Nor markdown (the Prompt pane's answer widget) or the node agent's HTTP: they load after."""
    env = {
        **({"MVP_WT": os.environ["MVP_WT"]} if os.environ.get("MVP_WT") else {}),
        "PYTHONPROFILEIMPORTTIME": "1",
        "MVP_PROVIDER": "local",
        "MVP_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
    }
    term = PtyDashboard(env, cols=160, rows=48)
    try:
        term.wait_for(FOOTER_KEY, within=60)  # a loaded CI machine paints late
        output = term.output
    finally:
        term.kill()
    before = output[: output.index(FOOTER_KEY.encode())].decode(errors="replace")
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in before.replace("\r", "").split("\n")
        if "import time:" in line and line.count("|") == 2
    }
    assert {"textual.app", "mvp_tui.tui.app"} <= modules  # the paint came after the app loaded
    assert heavy_in(modules - {m for m in modules if m.split(".")[0] == "textual"}) == []
    assert sorted(m for m in modules if m.split(".")[0] in AFTER_PAINT) == []

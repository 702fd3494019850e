"""Suite-wide settings: deterministic colour, no network beyond loopback."""

from __future__ import annotations

import os
from pathlib import Path

# Loopback only: every Python child the suite starts imports tests/loopback_only/
# sitecustomize.py (first on PYTHONPATH), which refuses to look up or connect to anything off
# loopback; this process imports it too. Without it a test that left a hub or an API unset
# sent a DNS query for huggingface.co off loopback, to the machine's resolver.
os.environ["PYTHONPATH"] = os.pathsep.join(
    part
    for part in (str(Path(__file__).resolve().with_name("loopback_only")),
                 os.environ.get("PYTHONPATH", ""))
    if part
)
import tests.loopback_only.sitecustomize  # noqa: F401

# Snapshot and screen tests must render the same everywhere.
os.environ.pop("NO_COLOR", None)
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
# The official vastai CLI must never phone home from tests.
os.environ["VASTAI_NO_UPDATE_CHECK"] = "1"
# Tests run side by side: each run's OpenAI endpoint on a free port, not the fixed default
# (a test of the default sets the port itself).
os.environ.setdefault("MVP_PROMPT_OPENAI_PORT", "0")
# A Vast run rotates its node's host key where MVP_BOOT_SSH_DIR says (default /etc/ssh): a
# test that does not name its sshd's must never reach this machine's own.
os.environ.setdefault("MVP_BOOT_SSH_DIR", "/nonexistent/mvp-tests-name-their-sshd-dir")

# The "rented node" (a real sshd on loopback) used by the end-to-end and dashboard tests.
# A fake Vast instance's start command installs the host key pinned before create: the test
# sshd at its SSH port adopts it (tests/ssh/pinned_key.py), as a real onstart would.
from mvp_tui.rehearsal.vastai_server import FakeVast
from tests.e2e.node import node  # noqa: F401

# The fault matrix's results table (tests/faults/): collected here, in the xdist controller.
from tests.faults.matrix import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401
from tests.ssh.pinned_key import install_pinned_host_key

FakeVast.default_container_start = install_pinned_host_key

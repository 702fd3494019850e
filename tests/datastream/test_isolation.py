"""The datastream is engine-side: importing it pulls in neither Textual nor any provider."""

from __future__ import annotations

import subprocess
import sys


def test_datastream_imports_no_textual_and_no_provider() -> None:
    code = (
        "import sys, mvp_tui.datastream, mvp_tui.datastream.replay;"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith(('textual.',"
        " 'mvp_tui.providers', 'httpx', 'asyncssh')));"
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""

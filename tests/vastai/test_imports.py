"""The Vast provider is engine-side code: importing it must not pull in Textual."""

from __future__ import annotations

import subprocess
import sys


def test_vast_provider_does_not_import_textual() -> None:
    code = (
        "import sys, mvp_tui.providers.vastai.client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"

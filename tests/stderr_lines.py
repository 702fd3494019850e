"""What on a command's stderr is not mvp-tui's own: warning records raised in other packages
(with the source line Python echoes under each) and tracebacks."""

from __future__ import annotations

import re
from pathlib import Path

import mvp_tui

OURS = Path(mvp_tui.__file__).resolve().parent
# warnings.formatwarning: "{file}:{line}: {Category}: {message}", then the source line indented.
WARNING_RECORD = re.compile(r"^(?P<file>\S.*?):(?P<line>\d+): (?P<category>[A-Za-z_][\w.]*): ")


def _is_ours(file: str) -> bool:
    return Path(file).resolve().is_relative_to(OURS)


def foreign_lines(stderr: str) -> list[str]:
    """The lines of `stderr` that another package wrote: warning records not raised in mvp_tui
    (and the source line under each), and any traceback."""
    found: list[str] = []
    echo = False
    for line in stderr.splitlines():
        record = WARNING_RECORD.match(line)
        if record and not _is_ours(record["file"]):
            found.append(line)
            echo = True
            continue
        if echo and line.startswith(" "):
            found.append(line)
            continue
        echo = False
        if line.startswith("Traceback (most recent call last)"):
            found.append(line)
    return found

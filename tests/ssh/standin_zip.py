"""The stand-in agent as the node receives the real one: one zipapp whose `__main__` runs the
stand-in, or the node's log reader and stopper (`follow` / `stop`, mvp_tui/node/follow.py)
as the real agent's does, so the SSH tests upload exactly what a bring-up uploads."""

from __future__ import annotations

import hashlib
import io
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STANDIN_SOURCE = Path(__file__).with_name("standin_agent.py")
MAIN = """\
import sys

if sys.argv[1:2] in (["follow"], ["stop"]):
    from mvp_tui.node.follow import main

    sys.exit(main())
import runpy

runpy.run_module("standin_agent", run_name="__main__")
"""


def _members(source: Path) -> list[tuple[str, bytes]]:
    members = [("__main__.py", MAIN.encode()), ("standin_agent.py", source.read_bytes())]
    for name in ("mvp_tui/__init__.py", "mvp_tui/node/__init__.py", "mvp_tui/node/follow.py"):
        members.append((name, (ROOT / name).read_bytes()))
    return members


def standin_zip(source: Path = STANDIN_SOURCE) -> Path:
    """A zipapp of `source` (run as its `__main__`) with the node's reader, built once per
    source state into the temp directory."""
    members = _members(source)
    digest = hashlib.sha256(b"".join(name.encode() + data for name, data in members))
    path = Path(tempfile.gettempdir()) / f"mvp-standin-{digest.hexdigest()[:16]}.pyz"
    if not path.is_file():
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            for name, data in members:
                archive.writestr(name, data)
        tmp = path.with_suffix(f".{id(out)}.tmp")
        tmp.write_bytes(out.getvalue())
        tmp.replace(path)
    return path

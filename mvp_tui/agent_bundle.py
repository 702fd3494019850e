"""The node agent as one file: a zipapp of `mvp_tui/node/` and the shared modules it imports.

Every route to a node (SFTP into the run directory, a Docker container's stdin, the local
provider's child) ships this one file and runs `python3 agent.pyz`. Its bytes depend only on
the sources: members in a fixed order, each with a fixed date and mode, so one tree always
builds the same file. It is named by the sha256 of its inputs and kept under the user's cache
(`$XDG_CACHE_HOME/mvp-tui/agent/<sha>.pyz`, else `~/.cache/...`), written atomically, so a
start-up that finds it reads the sources, hashes them and builds nothing.

Standard library only, as the node needs nothing else and this runs on the dashboard's path
to every lease.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent  # .../mvp_tui
# The modules outside mvp_tui/node/ that the agent imports: standard-library-only ones the app
# uses too (tests/foundation/test_layers.py holds the node package to exactly these).
SHARED_MODULES = ("__init__.py", "node_protocol.py", "secrets.py", "untrusted.py")
# Plain enough for any Python to compile, so an older one than the agent supports says so.
MAIN = b"""import sys

if sys.version_info < (3, 8):
    sys.exit("mvp-node needs Python 3.8 or later; this is " + sys.version.split()[0])
from mvp_tui.node.main import main

sys.exit(main())
"""
BUILD_FORMAT = b"mvp-agent-zipapp 1\n"  # bump when the layout below changes
FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest date
FILE_MODE = 0o644 << 16
SUFFIX = ".pyz"

_built: dict[tuple[Path, Path], Path] = {}  # (source root, cache dir) -> path, per process


def agent_members(root: Path = PACKAGE_ROOT) -> list[tuple[str, bytes]]:
    """The zip's members as (name inside the zip, bytes), in the order they are written."""
    names = [f"mvp_tui/{name}" for name in SHARED_MODULES]
    names += sorted(f"mvp_tui/node/{p.name}" for p in (root / "node").glob("*.py"))
    members = [("__main__.py", MAIN)]
    members += [(name, (root.parent / name).read_bytes()) for name in names]
    return members


def content_hash(members: list[tuple[str, bytes]]) -> str:
    """The sha256 of the build's inputs: the format, then each member's name and bytes."""
    digest = hashlib.sha256(BUILD_FORMAT)
    for name, data in members:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def zip_bytes(members: list[tuple[str, bytes]]) -> bytes:
    """The zipapp's bytes: deflated members, fixed dates and modes, no shebang (the node
    runs it as `python3 agent.pyz`, whichever Python that is)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = FILE_MODE
            info.create_system = 3  # Unix, whatever builds it, so the bytes match everywhere
            archive.writestr(info, data, compresslevel=9)
    return out.getvalue()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mvp-tui" / "agent"


def agent_zip(root: Path = PACKAGE_ROOT, directory: Path | None = None) -> Path:
    """The built agent for the sources under `root`: found in the cache, else built there.

    Once per process it reads and hashes the sources (about a millisecond); later calls
    return the same path.
    """
    directory = directory or cache_dir()
    key = (root, directory)
    if key in _built and _built[key].is_file():
        return _built[key]
    members = agent_members(root)
    path = directory / f"{content_hash(members)}{SUFFIX}"
    if not path.is_file():
        _write_atomically(path, zip_bytes(members))
    _built[key] = path
    return path


def _write_atomically(path: Path, data: bytes) -> None:
    """A whole file or none: another process starting at once sees the old state or this."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".agent-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

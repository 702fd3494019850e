"""A model file already in the cache: re-checked against the hub before it is served.

Beside each file the downloader placed lies `<file>.sha256`: `<sha256> <size> <inode>
<mtime_ns>`, the digest of the bytes renamed into place and the file's identity then. A later
start asks the hub again (one HEAD) and serves the cached file only when its size is the
hub's and its digest is the hub's: from the sidecar when it still describes the file (same
size, inode and mtime), else read from the file once (and the sidecar rewritten). A file that
fails is dropped and downloaded again, so a file planted on a persistent or shared cache (a
RunPod network volume) is not served for good. When the hub gives no digest (no answer, or
no `X-Linked-Etag`), the model is said to be unverified.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

from mvp_tui.node.hub import HubFile, _sha256_of

SIDECAR_SUFFIX = ".sha256"
_SIDECAR = re.compile(r"([0-9a-f]{64}) (\d{1,20} \d{1,20} \d{1,30})\s*")


def sidecar_path(dest: Path) -> Path:
    return dest.with_name(dest.name + SIDECAR_SUFFIX)


def _identity(dest: Path) -> str:
    found = dest.stat()
    return f"{found.st_size} {found.st_ino} {found.st_mtime_ns}"


def write_sidecar(dest: Path, sha256: str) -> None:
    """`<dest>.sha256` for the file now at `dest`, written whole or not at all."""
    side = sidecar_path(dest)
    tmp = side.with_name(f".{side.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{sha256} {_identity(dest)}\n")
    os.replace(str(tmp), str(side))


def read_sidecar(dest: Path) -> tuple[str, str] | None:
    """(sha256, "size inode mtime_ns") from the sidecar, or None."""
    try:
        text = sidecar_path(dest).read_text()[:200]
    except (OSError, UnicodeDecodeError):
        return None
    match = _SIDECAR.fullmatch(text)
    return (match.group(1), match.group(2)) if match else None


def verification(meta: HubFile | None) -> dict[str, Any]:
    """What the check against the hub proved, for the model phase's detail."""
    if meta is not None and meta.sha256:
        return {"verified": True}
    why = "no answer from the hub" if meta is None else "the hub gave no sha256 for this file"
    return {"verified": False, "unverified": f"{why}: its bytes are not checked"}


def cached_problem(dest: Path, meta: HubFile | None) -> tuple[str | None, dict[str, Any]]:
    """Why the cached file at `dest` must not be served (None: serve it), and the detail."""
    size = dest.stat().st_size
    detail: dict[str, Any] = {"cached": True, "bytes": size}
    side = read_sidecar(dest)
    same = side is not None and side[1] == _identity(dest)
    if meta is not None and meta.size is not None and size != meta.size:
        return f"is {size} bytes, the hub says {meta.size}", detail
    if meta is None or not meta.sha256:
        if side is not None and not same:
            return "is not the file downloaded there (its size, inode or mtime changed)", detail
        detail.update(verification(meta))
        return None, detail
    digest = side[0] if side is not None and same else None
    if digest != meta.sha256:
        digest = _sha256_of(dest)  # no sidecar, or one for another file: read the file once
        if digest == meta.sha256:
            write_sidecar(dest, digest)
    if digest != meta.sha256:
        return f"has sha256 {digest}, the hub says {meta.sha256}", detail
    detail.update(sha256=digest, **verification(meta))
    return None, detail


def drop_cached(dest: Path) -> None:
    """The cached file and its sidecar, removed (a file the hub does not vouch for)."""
    for path in (dest, sidecar_path(dest)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

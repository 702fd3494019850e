"""A model file already in the cache: re-checked against the hub before it is served.

When the downloader has placed a file it records `<sha256> <size> <inode> <mtime_ns>
<ctime_ns>`: the digest of the bytes renamed into place and the file's identity then. That
record lives in a node-local directory of the agent's own (`MVP_MODEL_VERIFIED_DIR`, by
default ~/.cache/mvp-node-verified, 0700), never beside the file: the cache may be a volume
other pods of the account write (a RunPod network volume), and a digest kept there could be
forged with the file. A later start asks the hub again (one HEAD) and serves the cached file
only when its size is the hub's and its digest is the hub's: from the record when it still
describes the file (same size, inode, mtime and ctime: an edit in place that restores the
mtime still moves the ctime, which no one can set back), else read from the file once (and
the record rewritten). A new node (a new pod) has no record: it reads the file. A file that
fails is dropped and downloaded again. When the hub gives no digest (no answer, or no
`X-Linked-Etag`), the model is said to be unverified. Left: the engine opens the file by path
after this check.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from mvp_tui.node.hub import HubFile, _sha256_of

SIDECAR_SUFFIX = ".sha256"
_SIDECAR = re.compile(r"([0-9a-f]{64}) (\d{1,20} \d{1,20} \d{1,30} \d{1,30})\s*")


def sidecar_path(dest: Path, verified_dir: Path) -> Path:
    """Where the record for the file at `dest` lives: in `verified_dir`, named by its path."""
    name = hashlib.sha256(str(dest.absolute()).encode("utf-8", "surrogateescape")).hexdigest()
    return verified_dir / (name + SIDECAR_SUFFIX)


def _identity(dest: Path) -> str:
    found = dest.stat()
    return f"{found.st_size} {found.st_ino} {found.st_mtime_ns} {found.st_ctime_ns}"


def _own_dir(directory: Path) -> bool:
    """`directory` exists (made 0700 if missing), is no link, is ours and only ours."""
    with contextlib.suppress(OSError):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        found = directory.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
        return False
    if found.st_mode & 0o077:
        try:
            directory.chmod(0o700)
        except OSError:
            return False
    return True


def write_sidecar(dest: Path, sha256: str, verified_dir: Path) -> None:
    """The record for the file now at `dest`, written whole or not at all; not written when
    `verified_dir` is not the agent's own (the file is then read at every start)."""
    if not _own_dir(verified_dir):
        return
    side = sidecar_path(dest, verified_dir)
    tmp = side.with_name(f".{side.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        tmp.write_text(f"{sha256} {_identity(dest)}\n")
        os.replace(str(tmp), str(side))


def read_sidecar(dest: Path, verified_dir: Path) -> tuple[str, str] | None:
    """(sha256, "size inode mtime_ns ctime_ns") from the record, or None."""
    if not _own_dir(verified_dir):
        return None
    try:
        text = sidecar_path(dest, verified_dir).read_text()[:200]
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


def cached_problem(
    dest: Path, meta: HubFile | None, verified_dir: Path
) -> tuple[str | None, dict[str, Any]]:
    """Why the cached file at `dest` must not be served (None: serve it), and the detail."""
    size = dest.stat().st_size
    detail: dict[str, Any] = {"cached": True, "bytes": size}
    side = read_sidecar(dest, verified_dir)
    same = side is not None and side[1] == _identity(dest)
    if meta is not None and meta.size is not None and size != meta.size:
        return f"is {size} bytes, the hub says {meta.size}", detail
    if meta is None or not meta.sha256:
        if side is not None and not same:
            return ("is not the file downloaded there (its size, inode, mtime or ctime "
                    "changed)"), detail
        detail.update(verification(meta))
        return None, detail
    digest = side[0] if side is not None and same else None
    if digest != meta.sha256:
        digest = _sha256_of(dest)  # no record here, or one for another file: read it once
        if digest == meta.sha256:
            write_sidecar(dest, digest, verified_dir)
    if digest != meta.sha256:
        return f"has sha256 {digest}, the hub says {meta.sha256}", detail
    detail.update(sha256=digest, **verification(meta))
    return None, detail


def drop_cached(dest: Path, verified_dir: Path) -> None:
    """The cached file and its records removed (a file the hub does not vouch for); a sidecar
    an older agent left beside it goes too."""
    old = dest.with_name(dest.name + SIDECAR_SUFFIX)
    for path in (dest, sidecar_path(dest, verified_dir), old):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

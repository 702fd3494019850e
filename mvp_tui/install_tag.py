"""This install's tag: what makes a label provably ours on a shared marketplace account.

A random tag is made once and kept in the state dir (`owner_tag`, 0600, written atomically
and never replaced), unless `[lease] owner_tag` names one (one identity across a person's
machines). Standard library only: `mvp-tui config` shows it without the engine.
Every label carries it, so a sweep destroys what carries it or what a record here holds,
and only reports what merely looks like an mvp-tui run.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tempfile
from pathlib import Path

TAG_FILE = "owner_tag"
# Lowercase ASCII letters and digits, at least 6 (longer than `r` and no `-`, so a label has one
# reading; see labels.py); the made one is 10 hex digits.
TAG_PATTERN = r"[a-z0-9]{6,16}"
_TAG = re.compile(TAG_PATTERN, re.ASCII)


def check_owner_tag(tag: str) -> str:
    """`tag` when it can be a label's owner part, else ValueError naming the fix."""
    if not _TAG.fullmatch(tag):
        raise ValueError(
            f"owner_tag {tag!r} is not usable: use 6-16 lowercase ASCII letters or digits"
        )
    return tag


def install_tag(state_dir: Path | str, configured: str = "") -> str:
    """The tag every label of this install carries: `configured` ([lease] owner_tag) when
    set, else the one kept in `state_dir`, made there on first use. OSError when it cannot
    be read or kept; ValueError when a kept one was altered into something unusable."""
    if configured:
        return check_owner_tag(configured)
    path = Path(state_dir) / TAG_FILE
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    Path(state_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    _keep(path, secrets.token_hex(5))
    return _read(path)  # ours, or the one another process kept first


def kept_tag(state_dir: Path | str) -> str | None:
    """The tag kept in `state_dir`, None when none was made yet (nothing is written)."""
    try:
        return _read(Path(state_dir) / TAG_FILE)
    except FileNotFoundError:
        return None


def _read(path: Path) -> str:
    text = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        return check_owner_tag(text)
    except ValueError:
        raise ValueError(
            f"{path} does not hold a usable install tag; restore it, or set [lease] owner_tag "
            "to the tag this install's labels carry"
        ) from None


def _keep(path: Path, tag: str) -> None:
    """Write `tag` durably at `path` unless a tag is there already (never replaced: labels
    on the account carry the first one)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(tag + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # atomic, and fails when another process kept one first
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)  # the link survives a power cut
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

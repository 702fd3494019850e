"""The hub's word on a file (size, sha256) before a byte moves, and checking a file against it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvp_tui.node.frames import clean_text
from mvp_tui.node.instance_api import _no_redirects
from mvp_tui.node.settings import DOWNLOAD_CHUNK, Settings

if TYPE_CHECKING:
    pass

# ---------------------------------------------------------------------------------------
# The hub's word on a file, and the start command's prefetch

class DownloadError(Exception):
    """A download attempt failed; `permanent` ones are not retried. `stalled`: the host's
    link stayed under the rate floor (permanent here, yet another host may do better)."""

    def __init__(self, message: str, permanent: bool = False, stalled: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent or stalled
        self.stalled = stalled



SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class HubFile:
    """What the hub says about one file before a byte moves (reference/hf-hub.md): its
    size and sha256 (LFS files: X-Linked-Size, X-Linked-Etag) and the commit it resolved to."""

    def __init__(self, size: int | None, sha256: str | None, commit: str | None) -> None:
        self.size, self.sha256, self.commit = size, sha256, commit


def hub_metadata(settings: Settings, url: str) -> HubFile | None:
    """A HEAD on the file's URL, redirects not followed (the CDN's answer lacks the hub's
    headers); None when the hub gives nothing usable: the download then checks what it can."""
    import http.client
    import urllib.error
    import urllib.request

    headers = {"User-Agent": "mvp-node/1", "Accept-Encoding": "identity"}
    if settings.hf_token:
        headers["Authorization"] = f"Bearer {settings.hf_token}"
    request = urllib.request.Request(url, headers=headers, method="HEAD")
    try:
        with urllib.request.build_opener(_no_redirects()).open(request, timeout=30) as answer:
            found, status = answer.headers, answer.status
    except urllib.error.HTTPError as exc:
        found, status = exc.headers, exc.code
    except (OSError, http.client.HTTPException, ValueError):
        return None
    if not 200 <= status < 400:
        return None
    etag = str(found.get("X-Linked-Etag") or "")
    etag = (etag[2:] if etag.startswith("W/") else etag).strip('"').lower()  # no removeprefix: 3.8
    size = str(found.get("X-Linked-Size") or "")
    if not size and status == 200:
        size = str(found.get("Content-Length") or "")
    commit = clean_text(str(found.get("X-Repo-Commit") or ""), 64) or None
    return HubFile(
        int(size) if size.isdigit() else None, etag if SHA256_HEX.fullmatch(etag) else None, commit
    )


def _hash_prefix(path: Path, length: int, digest: Any) -> None:
    with path.open("rb") as handle:
        while length > 0:
            block = handle.read(min(DOWNLOAD_CHUNK * 8, length))
            if not block:
                raise DownloadError(f"{path} is shorter than {length} more bytes")
            digest.update(block)
            length -= len(block)


def _sha256_of(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    _hash_prefix(path, path.stat().st_size, digest)
    return digest.hexdigest()


def _digest_problem(result: Mapping[str, Any], meta: HubFile | None) -> str | None:
    """Why the fetched bytes are not the hub's file, or None (also when the hub said nothing)."""
    if meta is None:
        return None
    if meta.size is not None and result.get("bytes") != meta.size:
        return f"is {result.get('bytes')} bytes, the hub says {meta.size}"
    if meta.sha256 and result.get("sha256") != meta.sha256:
        return f"has sha256 {result.get('sha256')}, the hub says {meta.sha256}"
    return None



"""The model: a local file checked, or a Hugging Face download, resumable, with progress."""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from mvp_tui.node.cached_model import verification, write_sidecar
from mvp_tui.node.control import Control, Interrupted
from mvp_tui.node.frames import Emitter
from mvp_tui.node.hub import DownloadError, HubFile, _digest_problem
from mvp_tui.node.part_file import PartFile
from mvp_tui.node.settings import (
    DOWNLOAD_CHUNK,
    GGUF_MAGIC,
    PROGRESS_EVERY_S,
    ConfigError,
    Settings,
)

if TYPE_CHECKING:
    import urllib.error
    import urllib.request

# ---------------------------------------------------------------------------------------
# Model


def gguf_problem(path: Path) -> str | None:
    """Why `path` is not a usable GGUF file, or None when it is."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except FileNotFoundError:
        return "file does not exist"
    except IsADirectoryError:
        return "is a directory, not a .gguf file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if head != GGUF_MAGIC:
        return "is not a GGUF file (it does not start with the GGUF magic bytes)"
    return None


def _drop_auth_on_cross_host_redirect() -> urllib.request.HTTPRedirectHandler:
    """A handler that follows redirects but never sends the hub token to another host (the
    CDN); made on first use, as urllib.request loads then."""
    import urllib.request

    class DropAuthOnCrossHostRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self,
            req: urllib.request.Request,
            fp: IO[bytes],
            code: int,
            msg: str,
            headers: Any,
            newurl: str,
        ) -> urllib.request.Request | None:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            old_host = urllib.parse.urlsplit(req.full_url).netloc
            if new is not None and urllib.parse.urlsplit(newurl).netloc != old_host:
                new.remove_header("Authorization")
            return new

    return DropAuthOnCrossHostRedirect()


def model_cache_path(settings: Settings) -> Path:
    """Where a hub file lands: <cache>/<owner>--<repo>/<revision>/<file>."""
    parts = [p for p in settings.gguf_file.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise ConfigError(
            f"[model] gguf_file (MVP_GGUF_FILE)={settings.gguf_file!r} is not a file path "
            "inside the repo"
        )
    revision = settings.gguf_revision.split("/")
    if any(p in ("", ".", "..") for p in revision):
        raise ConfigError(
            f"[model] gguf_revision (MVP_GGUF_REVISION)={settings.gguf_revision!r} is not a "
            "revision name (a branch, tag or commit)"
        )
    repo_dir = settings.gguf_repo.replace("/", "--")
    revision_dir = settings.gguf_revision.replace("/", "--")
    return settings.cache_dir.joinpath(repo_dir, revision_dir, *parts)


def hub_url(settings: Settings) -> str:
    repo = urllib.parse.quote(settings.gguf_repo, safe="/")
    revision = urllib.parse.quote(settings.gguf_revision, safe="")
    file = urllib.parse.quote(settings.gguf_file, safe="/")
    return f"{settings.hf_endpoint}/{repo}/resolve/{revision}/{file}"


class Downloader:
    """Fetches one hub file into `<dest>.part` with Range resumes, then renames it; the
    `.part` is this agent's alone meanwhile (node/part_file.py), and what is renamed into
    place is checked as it lies on disk (size, then sha256), not as it streamed."""

    def __init__(self, settings: Settings, emitter: Emitter, control: Control) -> None:
        self.settings = settings
        self.emitter = emitter
        self.control = control
        import urllib.request

        self.opener = urllib.request.build_opener(_drop_auth_on_cross_host_redirect())

    def fetch(self, url: str, dest: Path, meta: HubFile | None = None) -> dict[str, Any]:
        """The file at `dest`, resuming any `.part` (the prefetch's or an earlier try's);
        checked against `meta` (size, sha256) when the hub gave it. A `.part` we did not
        write ourselves whose digest is wrong is refused: deleted, and fetched once afresh."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = PartFile.claim(dest.with_name(dest.name + ".part"))
        try:
            result = self._fetch_claimed(url, part, meta)
            part.rename_to(dest)
        finally:
            part.close()
        write_sidecar(dest, result["sha256"], self.settings.verified_dir)
        result.update(verification(meta))
        return result

    def _fetch_claimed(self, url: str, part: PartFile, meta: HubFile | None) -> dict[str, Any]:
        found = part.size()
        if meta is not None and meta.size is not None and found > meta.size:
            part.start_at(0)  # longer than the file: not a prefix of it
            found = 0
        result = self._fetch_part(url, part, meta)
        problem = _digest_problem(result, meta)
        if problem and found:
            self.emitter.progress(
                "model", state="refused", reason=f"the file found on the node {problem}"
            )
            part.start_at(0)
            result = self._fetch_part(url, part, meta)
            result["refused_bytes"] = found
            problem = _digest_problem(result, meta)
        if not problem and part.head(4) != GGUF_MAGIC:
            problem = "is not a GGUF file (it does not start with the GGUF magic bytes)"
        if problem:
            part.discard()
            raise DownloadError(f"downloaded file {problem}", permanent=True)
        if found and "refused_bytes" not in result:
            result["adopted_bytes"] = found
        if part.distrusted:
            result["distrusted_writers"] = part.distrusted
        return result

    def _fetch_part(self, url: str, part: PartFile, meta: HubFile | None) -> dict[str, Any]:
        """Bring `part` to its whole length (no request when it already is); the size and
        sha256 of the file on disk, read back through our descriptor after the transfer."""
        have = part.size()
        if meta is not None and meta.size is not None and have == meta.size and have:
            self.emitter.progress("model", state="verifying", bytes_done=have, bytes_total=have)
            return {"bytes": have, "attempts": 0, "resumed_at": [], "sha256": part.sha256()}
        attempts = self.settings.download_retries + 1
        resumed_at: list[int] = []
        for attempt in range(1, attempts + 1):
            if part.size():
                resumed_at.append(part.size())
            try:
                written = self._attempt(url, part)
                break
            except DownloadError as exc:
                if exc.permanent or attempt == attempts:
                    raise
                self.emitter.progress(
                    "model", state="retrying", attempt=attempt, error=str(exc), url=url
                )
                delay = self.settings.download_retry_delay_s * (2 ** (attempt - 1))
                self.control.pause(min(delay, 30.0))
        on_disk = part.size()
        if on_disk != written:  # something on this host wrote to it after all
            raise DownloadError(f"the .part is {on_disk} bytes on disk, {written} were written")
        self.emitter.progress("model", state="verifying", bytes_done=on_disk, bytes_total=on_disk)
        return {"bytes": on_disk, "attempts": attempt, "resumed_at": resumed_at,
                "sha256": part.sha256()}

    def _request(self, url: str, offset: int) -> urllib.request.Request:
        import urllib.request

        request = urllib.request.Request(url, headers={"User-Agent": "mvp-node/1"})
        if self.settings.hf_token:
            request.add_header("Authorization", f"Bearer {self.settings.hf_token}")
        if offset:
            request.add_header("Range", f"bytes={offset}-")
        return request

    def _attempt(self, url: str, part: PartFile) -> int:
        import urllib.error

        offset = part.size()
        try:
            response = self.opener.open(self._request(url, offset), timeout=30)
        except urllib.error.HTTPError as exc:
            return self._http_error(exc, part, offset)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DownloadError(f"cannot reach {url}: {reason}") from None
        with response:
            status = response.status
            if offset and status == 200:
                offset = 0  # the server ignored Range: start over
            total = _content_total(response.headers, offset)
            if status == 206 and _content_start(response.headers) != offset:
                part.start_at(0)
                raise DownloadError("server resumed at the wrong offset; restarting")
            return self._copy(response, part, offset, total)

    def _copy(self, response: IO[bytes], part: PartFile, offset: int, total: int | None) -> int:
        import http.client

        done = offset
        started = time.monotonic()
        window_start, window_done = started, offset  # the floor's window: start, bytes then
        last_report = 0.0
        self.emitter.progress("model", state="downloading", bytes_done=done, bytes_total=total)
        part.start_at(offset)
        while True:
            if self.control.stop_requested:
                raise Interrupted()
            try:
                chunk = response.read(DOWNLOAD_CHUNK)
            except (OSError, ValueError, http.client.HTTPException) as exc:
                raise DownloadError(f"transfer broke at {done} bytes: {exc}") from None
            if not chunk:
                break
            part.write(chunk)
            done += len(chunk)
            now = time.monotonic()
            if self._floor_window_passed(now, window_start, done - window_done):
                window_start, window_done = now, done
            if now - last_report >= PROGRESS_EVERY_S:
                last_report = now
                rate = (done - offset) / max(now - started, 1e-6)
                self.emitter.progress(
                    "model",
                    state="downloading",
                    bytes_done=done,
                    bytes_total=total,
                    rate_bps=int(rate),
                )
        if total is not None and done != total:
            raise DownloadError(f"connection closed at {done} of {total} bytes")
        self.emitter.progress("model", state="downloaded", bytes_done=done, bytes_total=total)
        return done

    def _floor_window_passed(self, now: float, since: float, moved: int) -> bool:
        """True once a whole window passed at or above the floor (a new one starts);
        raises a stalled DownloadError when a whole window moved less."""
        floor, window = self.settings.download_floor_mbps, self.settings.download_floor_window_s
        if floor <= 0 or now - since < window:
            return False
        mbps = moved * 8 / 1e6 / (now - since)
        if mbps < floor:
            raise DownloadError(
                f"download stalled: {mbps:.2f} Mbit/s over {now - since:.0f} s, under the "
                f"floor of {floor:g} Mbit/s ([model] download_floor_mbps)",
                stalled=True,
            )
        return True

    def _http_error(self, exc: urllib.error.HTTPError, part: PartFile, offset: int) -> int:
        code = exc.code
        if code == 416 and offset:
            total = _content_total(exc.headers, 0)
            if total == offset:
                return offset  # the .part file is already complete
            part.start_at(0)
            raise DownloadError(f"HTTP 416 for a resume at {offset}; restarting")
        if code in (401, 403):
            hint = "set HF_TOKEN to a token that can read this repo"
            if self.settings.hf_token:
                hint = "the HF_TOKEN given cannot read this repo (gated or private)"
            raise DownloadError(f"access denied (HTTP {code}): {hint}", permanent=True)
        if code == 404:
            raise DownloadError(
                "not found (HTTP 404): check [model] gguf_repo / gguf_file / gguf_revision",
                permanent=True,
            )
        raise DownloadError(f"HTTP {code} from the hub", permanent=code < 500 and code != 429)


def _content_start(headers: Any) -> int | None:
    match = re.match(r"bytes (\d+)-", headers.get("Content-Range", "") or "")
    return int(match.group(1)) if match else None


def _content_total(headers: Any, offset: int) -> int | None:
    content_range = headers.get("Content-Range", "") or ""
    match = re.search(r"/(\d+)\s*$", content_range)
    if match:
        return int(match.group(1))
    length = headers.get("Content-Length")
    if length and str(length).isdigit():
        return offset + int(length)
    return None



"""The model bytes served are the hub's (issue 30 item 6): the downloader owns its `.part`
alone and checks the file renamed into place, not the stream; the prefetch is recognised by
the file it writes, not by its argv's text; a cached file is re-checked against the hub (its
`.sha256` sidecar, its size) before it is served; a hub that gave no digest is said."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mvp_tui.node.cached_model import cached_problem, read_sidecar, sidecar_path, write_sidecar
from mvp_tui.node.control import Control
from mvp_tui.node.download import Downloader, hub_url
from mvp_tui.node.frames import Emitter
from mvp_tui.node.hub import DownloadError, HubFile, hub_metadata
from mvp_tui.node.part_file import PartFile
from mvp_tui.node.prefetch import _fetching
from mvp_tui.node.settings import Settings
from mvp_tui.secrets import Redactor
from mvp_tui.widgets.bootstrap_model import _model_detail
from tests.agent.agent_run import AgentRun
from tests.agent.hub_server import HubServer
from tests.agent.test_agent_model_download import FILE, REPO, REVISION, _cached, _hub_env

DATA = b"GGUF" + bytes(range(256)) * 1200  # ~300 kB
SLEEP = "import time; time.sleep(30)"


def _downloader(tmp_path: Path, hub: HubServer) -> tuple[Downloader, str, Path]:
    settings = Settings({
        "MVP_HF_ENDPOINT": hub.url, "MVP_GGUF_REPO": REPO, "MVP_GGUF_FILE": FILE,
        "MVP_GGUF_REVISION": REVISION, "MVP_MODEL_CACHE_DIR": str(tmp_path / "cache"),
        "MVP_DOWNLOAD_RETRIES": "0", "MVP_MODEL_VERIFIED_DIR": str(tmp_path / "verified"),
    })
    out = os.open(os.devnull, os.O_WRONLY)
    emitter = Emitter(out, Redactor([]), "r-1", 1)
    dest = _cached(tmp_path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    return Downloader(settings, emitter, Control()), hub_url(settings), dest


def _intruder(part: Path) -> subprocess.Popen[bytes]:
    """Another process with the `.part` open for appending (a fetch that outlived its stop)."""
    proc = subprocess.Popen(["sh", "-c", 'exec cat >>"$0"', str(part)], stdin=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while not any(os.path.samefile(f"/proc/{proc.pid}/fd/{fd}", part)
                  for fd in os.listdir(f"/proc/{proc.pid}/fd") if fd == "1"):
        assert time.monotonic() < deadline, "the intruder never opened the .part"
        time.sleep(0.01)
    return proc


def test_a_writer_still_holding_the_part_gets_it_and_the_download_is_clean(
    tmp_path: Path, hub: HubServer
) -> None:
    """The intruder appends while the transfer runs: the stream's digest would still match,
    the file would not. The claim sees it holding the inode, leaves that inode to it and
    downloads into a fresh one; the file renamed into place is the hub's, checked on disk."""
    hub.add_file(REPO, REVISION, FILE, DATA)
    hub.state.rate_bps = 1_000_000  # the body takes ~0.3 s: the intruder writes meanwhile
    downloader, url, dest = _downloader(tmp_path, hub)
    part = dest.with_name(FILE + ".part")
    part.write_bytes(DATA[:1500])  # a prefetch's bytes so far
    intruder = _intruder(part)
    results: list[dict[str, object]] = []
    fetch = threading.Thread(target=lambda: results.append(
        downloader.fetch(url, dest, hub_metadata(downloader.settings, url))))
    try:
        fetch.start()
        deadline = time.monotonic() + 10
        while hub.state.first_body_at is None:
            assert time.monotonic() < deadline, "no body started"
            time.sleep(0.005)
        assert intruder.stdin is not None
        intruder.stdin.write(b"\0" * 32)
        intruder.stdin.flush()
        fetch.join(20)
    finally:
        intruder.kill()
        intruder.wait()
    (result,) = results
    assert dest.read_bytes() == DATA, "the file renamed into place is not the hub's"
    assert result["verified"] is True and result["sha256"] == hashlib.sha256(DATA).hexdigest()
    assert result["distrusted_writers"] == [intruder.pid]
    recorded = read_sidecar(dest, tmp_path / "verified")
    assert recorded is not None and recorded[0] == result["sha256"]


def test_bytes_written_past_the_claim_fail_the_size_check_on_disk(tmp_path: Path) -> None:
    part = PartFile.claim(tmp_path / "m.gguf.part")
    try:
        part.write(b"GGUF1234")
        assert part.size() == 8
        with (tmp_path / "m.gguf.part").open("ab") as other:  # opened after the claim
            other.write(b"more")
        assert part.size() == 12  # what the downloader compares with the bytes it wrote
        with pytest.raises(DownloadError, match="another process holds"):
            PartFile.claim(tmp_path / "m.gguf.part")  # a second agent: the lock is ours
    finally:
        part.close()


def test_a_part_behind_a_link_is_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep me")
    (tmp_path / "m.gguf.part").symlink_to(target)
    part = PartFile.claim(tmp_path / "m.gguf.part")
    try:
        part.write(b"GGUF")
    finally:
        part.close()
    assert target.read_bytes() == b"keep me" and not (tmp_path / "m.gguf.part").is_symlink()


def test_the_prefetch_is_recognised_by_its_file_not_its_argv_text(tmp_path: Path) -> None:
    """The state line's pid is the prefetch when it writes (or names, as a path) that very
    file: `cache//repo/../repo/m.gguf.part`, as a cache dir with a trailing slash makes it,
    is still that file; another file is not."""
    folder = tmp_path / "cache" / "repo"
    folder.mkdir(parents=True)
    part = folder / "m.gguf.part"
    part.write_bytes(b"GGUF")
    spelled = f"{tmp_path}/cache//repo/../repo/m.gguf.part"
    named = subprocess.Popen([sys.executable, "-c", SLEEP, spelled])
    holding = subprocess.Popen(["sh", "-c", "exec sleep 30", "x"], stdout=part.open("ab"))
    other = subprocess.Popen([sys.executable, "-c", SLEEP, str(folder / "other.part")])
    try:
        deadline = time.monotonic() + 10
        while not _fetching(holding.pid, part):
            assert time.monotonic() < deadline, "the process holding the file is not seen"
            time.sleep(0.01)
        assert _fetching(named.pid, part)
        assert not _fetching(other.pid, part)
    finally:
        for proc in (named, holding, other):
            proc.kill()
            proc.wait()


def test_a_cached_file_is_checked_against_the_hub_before_it_is_served(tmp_path: Path) -> None:
    dest = tmp_path / "m.gguf"
    verified = tmp_path / "verified"
    dest.write_bytes(DATA)
    digest = hashlib.sha256(DATA).hexdigest()
    hub = HubFile(len(DATA), digest, "c0ffee")
    # No sidecar (placed by someone else): read once, then vouched for by its sidecar.
    assert cached_problem(dest, hub, verified) == (
        None, {"cached": True, "bytes": len(DATA), "sha256": digest, "verified": True}
    )
    assert read_sidecar(dest, verified) is not None
    # The hub's size differs: refused on size alone.
    problem, _ = cached_problem(dest, HubFile(len(DATA) + 1, digest, None), verified)
    assert problem == f"is {len(DATA)} bytes, the hub says {len(DATA) + 1}"
    # Same size, other bytes, the sidecar left as it was: the file changed, so it is read.
    planted = DATA[:-4] + b"evil"
    dest.write_bytes(planted)
    os.utime(dest, ns=(1, 1))
    problem, _ = cached_problem(dest, hub, verified)
    assert problem is not None and "sha256" in problem
    # The hub says nothing: served, and said to be unverified.
    write_sidecar(dest, hashlib.sha256(planted).hexdigest(), verified)
    problem, detail = cached_problem(dest, None, verified)
    assert problem is None and detail["verified"] is False
    assert "no answer from the hub" in detail["unverified"]
    assert _model_detail(detail) == "cached unverified"
    sidecar_path(dest, verified).write_text("0" * 64 + " 1 2 3 4\n")  # another file's record
    assert cached_problem(dest, None, verified)[0] is not None


def test_a_planted_file_with_a_forged_digest_beside_it_is_read_and_refused(
    tmp_path: Path,
) -> None:
    """A shared cache (a RunPod network volume another pod writes): a GGUF planted with a
    sidecar beside it naming the hub's digest and the planted file's own identity, as the
    agents before this one kept it. Nothing on the volume is trusted: the file is read."""
    dest = tmp_path / "volume" / "m.gguf"
    dest.parent.mkdir()
    planted = DATA[:-4] + b"evil"
    dest.write_bytes(planted)
    found = dest.stat()
    digest = hashlib.sha256(DATA).hexdigest()  # the hub's
    forged = f"{digest} {found.st_size} {found.st_ino} {found.st_mtime_ns}\n"
    dest.with_name(dest.name + ".sha256").write_text(forged)
    verified = tmp_path / "node-local"
    problem, _ = cached_problem(dest, HubFile(len(DATA), digest, None), verified)
    assert problem == f"has sha256 {hashlib.sha256(planted).hexdigest()}, the hub says {digest}"
    assert read_sidecar(dest, verified) is None  # nothing recorded for it
    assert verified.stat().st_mode & 0o777 == 0o700


def test_an_edit_in_place_with_its_mtime_restored_is_read_again(tmp_path: Path) -> None:
    """The record's identity holds the ctime, which an edit moves and no one can set back."""
    dest = tmp_path / "m.gguf"
    dest.write_bytes(DATA)
    verified = tmp_path / "verified"
    hub = HubFile(len(DATA), hashlib.sha256(DATA).hexdigest(), None)
    assert cached_problem(dest, hub, verified)[0] is None  # read once, recorded
    before = dest.stat()
    deadline = time.monotonic() + 5
    while dest.stat().st_ctime_ns == before.st_ctime_ns:  # a coarse clock: edit until it shows
        assert time.monotonic() < deadline, "the ctime never moved"
        with dest.open("r+b") as out:
            out.seek(len(DATA) - 4)
            out.write(b"evil")
        os.utime(dest, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = dest.stat()
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (
        before.st_size, before.st_ino, before.st_mtime_ns)
    problem, _ = cached_problem(dest, hub, verified)
    assert problem is not None and "sha256" in problem


def test_a_download_the_hub_gave_no_digest_for_is_said_to_be_unverified(
    tmp_path: Path, hub: HubServer
) -> None:
    hub.add_file(REPO, REVISION, FILE, DATA)
    downloader, url, dest = _downloader(tmp_path, hub)
    result = downloader.fetch(url, dest, HubFile(len(DATA), None, None))  # no X-Linked-Etag
    assert result["verified"] is False
    assert result["unverified"] == "the hub gave no sha256 for this file: its bytes are not checked"
    assert _model_detail({"source": "hub", "bytes": len(DATA), **result}).endswith("unverified")


async def test_a_planted_cached_file_is_replaced_by_the_hubs(
    tmp_path: Path, tiny_bytes: bytes, hub: HubServer
) -> None:
    """A file of the right size but other bytes waiting in the cache (a shared volume) is
    refused when the agent starts, and the hub's file downloaded in its place."""
    hub.add_file(REPO, REVISION, FILE, tiny_bytes)
    planted = tiny_bytes[:-8] + b"\0" * 8
    _cached(tmp_path).parent.mkdir(parents=True)
    _cached(tmp_path).write_bytes(planted)
    marker = tmp_path / "engine-started"
    env = _hub_env(tmp_path, hub, MVP_ENGINE_CMD=f"sh -c 'touch {marker}'")
    run = await AgentRun.start(env)
    try:
        await run.wait_phase("model", "ready")
        detail = run.phase_detail("model", "ready")
        assert detail["verified"] is True and detail["cached"] is False
        assert _cached(tmp_path).read_bytes() == tiny_bytes
        refused = [p for p in run.channel("mvp.node.1.agent")
                   if p["type"] == "NodeAgentProgress" and p.get("state") == "refused"]
        assert refused and "the cached file has sha256" in refused[0]["reason"]
    finally:
        await run.kill()

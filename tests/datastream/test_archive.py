"""Archive: what a run wrote reads back as the same frames; bad files fail clearly."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from mvp_tui.datastream.archive import ArchiveError, FrameArchive, read_archive, read_frames
from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.channels import LogStream
from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.datastream.frame_line import encode_frame_line
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.records import OrchestratorEmitter, StepStatus


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def run_a_small_run(hub: ChannelHub) -> None:
    emitter = OrchestratorEmitter(hub, run_id=7, node_id=1)
    bridge = NodeBridge(hub, 1, StreamId("1", 7))
    emitter.emit_bootstrap("config", StepStatus.READY, {"provider": "local"})
    for i in range(30):
        bridge.feed_line("stdout", encode_frame_line("mvp.node.1.engine", f"log {i}").encode())
        bridge.feed_line("stderr", b"warn \xff %d" % i)
        if i % 10 == 0:
            bridge.feed_line("stdout", encode_frame_line("mvp.node.1.agent", {"i": i}).encode())
            emitter.emit_log(LogStream.STDOUT, f"engine note {i}")
    bridge.feed_provider_line("ssh ok")


def test_archive_round_trip_reproduces_channel_counts_positions_and_payloads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run" / "frames.jsonl"  # parent dirs are created
    live_frames: list[Frame] = []
    with FrameArchive(path) as archive:
        live = ChannelHub(archive=archive)
        live.listeners.append(live_frames.append)
        run_a_small_run(live)

    records = list(read_archive(path))
    assert [r.arrival_seq for r in records] == list(range(len(live_frames)))
    assert [r.frame for r in records] == live_frames
    assert {r.source for r in records} == {"orchestrator", "node_bootstrap_stdio"}

    replayed = ChannelHub()
    for record in records:
        replayed.publish(record.frame, source=record.source)
    want = {(c.channel, c.count, c.last_position, c.total_bytes) for c in live.snapshot().channels}
    got = {
        (c.channel, c.count, c.last_position, c.total_bytes) for c in replayed.snapshot().channels
    }
    assert got == want
    assert list(read_frames(path)) == live_frames


def test_records_are_buffered_and_flushed_on_count_time_and_close(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    clock = FakeClock()
    archive = FrameArchive(path, flush_records=3, flush_interval_s=1.0, clock=clock)
    frame = Frame(StreamId("n", 1), "c", 0, b"x")
    archive.record("orchestrator", frame)
    archive.record("orchestrator", frame)
    assert path.read_text() == ""  # buffered
    archive.record("orchestrator", frame)
    assert len(path.read_text().splitlines()) == 3  # count reached
    archive.record("orchestrator", frame)
    clock.now += 1.5
    archive.record("orchestrator", frame)
    assert len(path.read_text().splitlines()) == 5  # interval passed
    archive.record("orchestrator", frame)
    archive.close()
    assert len(path.read_text().splitlines()) == 6
    assert archive.closed


def test_hub_flush_pushes_buffered_records(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    hub = ChannelHub(archive=FrameArchive(path))
    hub.publish("c", b"1")
    assert path.read_text() == ""
    hub.flush()
    assert json.loads(path.read_text())["payload"] == {"encoding": "utf8", "value": "1"}


def test_timing_adds_t_after_the_seeds_keys(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "t.jsonl"
    with FrameArchive(path, timing=True, clock=clock) as archive:
        archive.record("orchestrator", Frame(StreamId("n", 1), "c", 0, b"a"))
        clock.now += 0.25
        archive.record("orchestrator", Frame(StreamId("n", 1), "c", 1, b"b"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert list(lines[1]) == [
        "arrival_seq",
        "source",
        "stream",
        "channel",
        "position",
        "payload",
        "t",
    ]
    assert [line["t"] for line in lines] == [0.0, 0.25]
    assert [r.t for r in read_archive(path)] == [0.0, 0.25]


def test_a_corrupt_line_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    with FrameArchive(path) as archive:
        archive.record("orchestrator", Frame(StreamId("n", 1), "c", 0, b"a"))
    with path.open("a") as handle:
        handle.write('{"arrival_seq": 1, "source": "x"}\n')
    with pytest.raises(ArchiveError, match=rf"{path}:2: .*'stream'.*fix"):
        list(read_archive(path))


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1]",
        '{"arrival_seq":0,"source":"s","stream":"nohash","channel":"c","position":0,'
        '"payload":{"encoding":"utf8","value":""}}',
        '{"arrival_seq":0,"source":"s","stream":"n#1","channel":"c","position":0,'
        '"payload":{"encoding":"bytes","value":[256]}}',
        '{"arrival_seq":0,"source":"s","stream":"n#1","channel":"c","position":0,'
        '"payload":{"encoding":"base64","value":""}}',
        '{"arrival_seq":true,"source":"s","stream":"n#1","channel":"c","position":0,'
        '"payload":{"encoding":"utf8","value":""}}',
    ],
)
def test_malformed_records_are_errors(tmp_path: Path, line: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ArchiveError, match=rf"{path}:1: not a frame archive record"):
        list(read_archive(path))


def test_a_torn_last_line_from_a_crash_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    with FrameArchive(path) as archive:
        archive.record("orchestrator", Frame(StreamId("n", 1), "c", 0, b"a"))
    with path.open("a") as handle:
        handle.write('{"arrival_seq":1,"source":"orch')
    assert [r.frame.payload for r in read_archive(path)] == [b"a"]


def test_missing_archive_and_unwritable_path_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match=r"open frame archive .*missing\.jsonl"):
        list(read_archive(tmp_path / "missing.jsonl"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ArchiveError, match="fix: choose a writable path"):
        FrameArchive(blocker / "frames.jsonl")


def test_a_full_disk_stops_the_archive_not_the_run() -> None:
    full = Path("/dev/full")
    if not full.exists():
        pytest.skip("/dev/full is Linux-only")
    archive = FrameArchive(full, flush_records=2)
    hub = ChannelHub(archive=archive)
    for i in range(5):
        hub.publish("c", b"%d" % i)
    archive.close()
    assert hub.snapshot().channels[0].count == 5
    assert archive.error is not None
    assert "/dev/full" in str(archive.error) and "fix:" in str(archive.error)
    assert archive.lost == 5


def test_the_archive_is_private_to_its_owner(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.jsonl"
    FrameArchive(fresh).close()
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    # One left readable by an older version is tightened when it is appended to.
    older = tmp_path / "older.jsonl"
    older.write_text("")
    older.chmod(0o644)
    FrameArchive(older).close()
    assert stat.S_IMODE(older.stat().st_mode) == 0o600


def test_the_archive_never_follows_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep\n")
    link = tmp_path / "frames.jsonl"
    link.symlink_to(target)
    with pytest.raises(ArchiveError, match="symbolic link"):
        FrameArchive(link)
    assert target.read_text() == "keep\n"

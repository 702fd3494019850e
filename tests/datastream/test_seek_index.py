"""Seeking through a checkpoint rebuilds exactly the hub a full replay up to there builds."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from mvp_tui.datastream.archive import ArchiveError, FrameArchive, parse_record, read_archive
from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.replay import ReplaySource

STREAM = StreamId("1", 7)
RING = {"ring_frames": 12, "ring_bytes": 300}


def write_mixed(path: Path, count: int) -> None:
    """Channels at very different rates and payload sizes, so rings start far back, evict
    by count on one channel and by bytes on another."""
    rng = random.Random(7)
    positions: dict[str, int] = {}
    with FrameArchive(path) as archive:
        for i in range(count):
            if i % 37 == 0:
                channel = "mvp.node.1.agent"  # rare: its ring reaches back many checkpoints
            elif i % 5 == 0:
                channel = "mvp.node.1.big"  # large payloads: evicted by bytes
            else:
                channel = "mvp.node.1.engine"
            size = rng.randint(40, 90) if channel.endswith("big") else rng.randint(1, 12)
            payload = b"\xff" if i % 101 == 0 else bytes([97 + i % 26]) * size
            position = positions.get(channel, -1) + 1
            positions[channel] = position
            archive.record("node_bootstrap_stdio", Frame(STREAM, channel, position, payload))


def picture(hub: ChannelHub) -> list[tuple[object, ...]]:
    """Everything the UI can read off a hub but times: stats and every retained frame."""
    return [
        (c.channel, c.count, c.last_position, c.total_bytes, c.retained,
         tuple(hub.tail(c.channel).frames))
        for c in hub.snapshot().channels
    ]


def replayed_up_to(path: Path, n: int) -> ChannelHub:
    hub = ChannelHub(**RING)
    for record in list(read_archive(path))[:n]:
        hub.publish(record.frame, source=record.source)
    return hub


async def seek_and_picture(source: ReplaySource, hub: ChannelHub, target: int) -> object:
    source.seek(target)
    await asyncio.wait_for(source.idle.wait(), 10)
    return picture(hub)


async def test_seeks_anywhere_match_a_full_replay(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    write_mixed(path, 1500)
    source = ReplaySource(path, sleep=lambda _: asyncio.sleep(0), index_every=64)
    source.pause()
    hub = ChannelHub(**RING)
    task = asyncio.create_task(source.feed(hub, hold_at_end=True))
    await asyncio.wait_for(source.idle.wait(), 10)
    try:
        for target in (1500, 700, 64, 65, 1, 0, 1499, 900, 901, 128, 2000, 333):
            want = picture(replayed_up_to(path, target))
            assert await seek_and_picture(source, hub, target) == want, target
            assert source.index == min(target, 1500)
        assert source._index is not None and len(source._index.checkpoints) > 20
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_replay_goes_on_from_a_seek_as_from_a_full_replay(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    write_mixed(path, 600)
    source = ReplaySource(path, speed=float("inf"), index_every=50)
    source.pause()
    hub = ChannelHub(**RING)
    task = asyncio.create_task(source.feed(hub))
    await asyncio.wait_for(source.idle.wait(), 10)
    source.seek(433)
    await asyncio.wait_for(source.idle.wait(), 10)
    source.resume()
    assert await asyncio.wait_for(task, 10) == 600
    assert picture(hub) == picture(replayed_up_to(path, 600))


async def test_a_bad_line_stops_the_replay_there_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    write_mixed(path, 300)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[200] = b'{"arrival_seq": "not a record"}\n'
    path.write_bytes(b"".join(lines))
    source = ReplaySource(path, speed=float("inf"), index_every=16)
    hub = ChannelHub(**RING)
    with pytest.raises(ArchiveError, match=r"mixed\.jsonl:201: not a frame archive record"):
        await asyncio.wait_for(source.feed(hub), 10)
    assert source.index == 200
    assert picture(hub) == picture(replayed_up_to_raw(lines[:200]))


def replayed_up_to_raw(lines: list[bytes]) -> ChannelHub:
    hub = ChannelHub(**RING)
    for line in lines:
        record = parse_record(line.decode())
        hub.publish(record.frame, source=record.source)
    return hub

"""ReplaySource: pacing scaled by speed, pause/resume, seek — with an injected sleep."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mvp_tui.datastream.archive import FrameArchive, read_archive
from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.replay import ReplaySource

STREAM = StreamId("1", 7)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class RecordingSleep:
    """Stands in for asyncio.sleep: records each delay, returns at once, may run a hook."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.hook: object = None

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if callable(self.hook):
            self.hook(len(self.delays))
        await asyncio.sleep(0)  # a yield to the loop, not a wait


def write_timed(path: Path, times: list[float]) -> None:
    clock = FakeClock()
    with FrameArchive(path, timing=True, clock=clock) as archive:
        for i, t in enumerate(times):
            clock.now = t
            archive.record("orchestrator", Frame(STREAM, f"c{i % 3}", i, b"%d" % i))


def write_untimed(path: Path, count: int) -> None:
    with FrameArchive(path) as archive:
        for i in range(count):
            archive.record("orchestrator", Frame(STREAM, f"c{i % 3}", i // 3, b"%d" % i))


def state(hub: ChannelHub) -> set[tuple[str, int, int]]:
    return {(c.channel, c.count, c.last_position) for c in hub.snapshot().channels}


def hub_after(path: Path, n: int) -> ChannelHub:
    hub = ChannelHub()
    for record in list(read_archive(path))[:n]:
        hub.publish(record.frame, source=record.source)
    return hub


async def test_timed_archive_replays_at_the_original_pace_scaled_by_speed(tmp_path: Path) -> None:
    path = tmp_path / "timed.jsonl"
    write_timed(path, [0.0, 0.5, 1.5, 1.5, 20.0])
    sleep = RecordingSleep()
    source = ReplaySource(path, speed=2.0, sleep=sleep, max_gap_s=5.0)
    hub = ChannelHub()
    assert await source.feed(hub) == 5
    assert sleep.delays == pytest.approx([0.25, 0.5, 2.5])  # the 0 gap is not slept; 18.5 s capped
    assert state(hub) == state(hub_after(path, 5))
    assert source.finished


async def test_seed_archives_without_times_are_paced_by_arrival_order(tmp_path: Path) -> None:
    path = tmp_path / "seed.jsonl"
    write_untimed(path, 4)
    assert "t" not in json.loads(path.read_text().splitlines()[0])
    sleep = RecordingSleep()
    source = ReplaySource(path, speed=4.0, sleep=sleep, untimed_step_s=0.1)
    hub = ChannelHub()
    await source.feed(hub)
    assert sleep.delays == pytest.approx([0.025, 0.025, 0.025])
    assert [f.payload for f in hub.tail("c0").frames] == [b"0", b"3"]


async def test_pause_holds_the_hub_steady_until_resume(tmp_path: Path) -> None:
    path = tmp_path / "timed.jsonl"
    write_timed(path, [float(i) for i in range(10)])
    sleep = RecordingSleep()
    source = ReplaySource(path, sleep=sleep)
    sleep.hook = lambda n: source.pause() if n == 3 else None  # pause during the 3rd wait
    hub = ChannelHub()
    task = asyncio.create_task(source.feed(hub))
    await asyncio.wait_for(source.idle.wait(), timeout=5)
    assert source.paused
    assert source.index == 3  # frames 0..2 out; frame 3 waits for resume
    assert state(hub) == state(hub_after(path, 3))
    version = hub.version
    source.speed = 10.0
    source.resume()
    assert await asyncio.wait_for(task, timeout=5) == 10
    assert hub.version == version + 7
    assert sleep.delays[-1] == pytest.approx(0.1)  # the new speed applies after resume


async def test_seek_rebuilds_the_hub_forwards_and_backwards(tmp_path: Path) -> None:
    path = tmp_path / "seed.jsonl"
    write_untimed(path, 30)
    sleep = RecordingSleep()
    source = ReplaySource(path, sleep=sleep)
    source.pause()
    hub = ChannelHub()
    task = asyncio.create_task(source.feed(hub))
    await asyncio.wait_for(source.idle.wait(), timeout=5)
    assert hub.snapshot().channels == ()

    source.seek(20)
    await asyncio.wait_for(source.idle.wait(), timeout=5)
    assert source.index == 20
    assert state(hub) == state(hub_after(path, 20))
    assert sleep.delays == []  # a seek does not pace

    epoch = hub.epoch
    source.seek(5)
    await asyncio.wait_for(source.idle.wait(), timeout=5)
    assert source.index == 5
    assert hub.epoch == epoch + 1  # the UI learns positions restarted
    assert state(hub) == state(hub_after(path, 5))

    source.seek(1000)  # past the end: everything, then done
    source.resume()
    assert await asyncio.wait_for(task, timeout=5) == 30
    assert state(hub) == state(hub_after(path, 30))


async def test_a_seek_during_a_wait_skips_that_wait(tmp_path: Path) -> None:
    path = tmp_path / "timed.jsonl"
    write_timed(path, [0.0, 100.0, 200.0, 300.0])
    sleep = RecordingSleep()
    source = ReplaySource(path, sleep=sleep, max_gap_s=1000.0)
    sleep.hook = lambda n: source.seek(3) if n == 1 else None
    hub = ChannelHub()
    assert await source.feed(hub) == 4
    assert sleep.delays == [100.0]  # the seek lands on record 3, which comes at once
    assert state(hub) == state(hub_after(path, 4))


def test_speed_and_seek_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="speed"):
        ReplaySource(tmp_path / "x.jsonl", speed=0)
    source = ReplaySource(tmp_path / "x.jsonl")
    with pytest.raises(ValueError, match="seek"):
        source.seek(-1)


async def test_infinite_speed_never_sleeps(tmp_path: Path) -> None:
    path = tmp_path / "timed.jsonl"
    write_timed(path, [0.0, 1.0, 2.0])
    sleep = RecordingSleep()
    await ReplaySource(path, speed=float("inf"), sleep=sleep).feed(ChannelHub())
    assert sleep.delays == []

"""ChannelHub: positions, bounded rings with counts that keep counting, rates, tails."""

from __future__ import annotations

import pytest

from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.datastream.hub import ChannelHub, ChannelLimitError


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_positions_are_monotonic_per_channel_and_start_at_zero() -> None:
    hub = ChannelHub()
    a = [hub.publish("a", b"x").position for _ in range(3)]
    b = [hub.publish("b", b"y").position for _ in range(2)]
    a.append(hub.publish("a", b"z").position)
    assert a == [0, 1, 2, 3]
    assert b == [0, 1]


def test_given_positions_are_kept_when_they_advance_and_renumbered_when_not() -> None:
    hub = ChannelHub()
    stream = StreamId("n", 1)
    assert hub.publish(Frame(stream, "c", 10, b"")).position == 10
    assert hub.publish(Frame(stream, "c", 4, b"")).position == 11  # would go backwards
    assert hub.publish("c", b"").position == 12
    assert hub.publish(Frame(stream, "c", 20, b"")).position == 20


def test_ring_stays_bounded_while_counts_keep_counting() -> None:
    hub = ChannelHub(ring_frames=50)
    for i in range(100_000):
        hub.publish("flood", b"%d" % i)
    stats = hub.snapshot().get("flood")
    assert stats is not None
    assert stats.count == 100_000
    assert stats.retained == 50
    assert stats.last_position == 99_999
    assert stats.total_bytes == sum(len(b"%d" % i) for i in range(100_000))
    tail = hub.tail("flood", -1)
    assert [f.payload for f in tail.frames] == [b"%d" % i for i in range(99_950, 100_000)]
    assert tail.dropped == 99_950


def test_ring_is_bounded_by_bytes_too_but_keeps_the_newest_frame() -> None:
    hub = ChannelHub(ring_frames=1000, ring_bytes=100)
    for _ in range(10):
        hub.publish("big", b"x" * 30)
    assert hub.snapshot().channels[0].retained == 3  # 90 bytes ≤ 100
    hub.publish("big", b"y" * 500)  # one frame alone over the budget is still shown
    tail = hub.tail("big", -1)
    assert [f.payload for f in tail.frames] == [b"y" * 500]


def test_tail_returns_only_newer_frames_and_counts_what_left_the_ring() -> None:
    hub = ChannelHub(ring_frames=5)
    for i in range(8):
        hub.publish("c", bytes([i]))
    tail = hub.tail("c", 5)
    assert [f.position for f in tail.frames] == [6, 7]
    assert tail.dropped == 0
    assert tail.last_position == 7
    behind = hub.tail("c", 0)  # 1..7 are new, 1 and 2 already left the ring
    assert [f.position for f in behind.frames] == [3, 4, 5, 6, 7]
    assert behind.dropped == 2
    limited = hub.tail("c", -1, limit=2)
    assert [f.position for f in limited.frames] == [6, 7]
    assert limited.dropped == 6
    assert hub.tail("c", 7).frames == []
    assert hub.tail("unknown", -1).frames == []


def test_version_bumps_on_every_change_and_reset_changes_epoch() -> None:
    hub = ChannelHub()
    v0 = hub.version
    hub.publish("c", b"1")
    hub.publish("c", b"2")
    assert hub.version == v0 + 2
    hub.reset()
    snapshot = hub.snapshot()
    assert snapshot.epoch == 1
    assert snapshot.version == v0 + 3
    assert snapshot.channels == ()


def test_rate_counts_frames_per_second_over_the_recent_window() -> None:
    clock = FakeClock(1000.0)
    hub = ChannelHub(clock=clock, rate_window_s=10)
    for _ in range(50):  # 10 frames/s for 5 s
        hub.publish("c", b"")
        clock.now += 0.1
    stats = hub.snapshot().get("c")
    assert stats is not None
    assert stats.rate == pytest.approx(10.0, rel=0.05)
    assert stats.first_at == 1000.0
    assert stats.last_at == pytest.approx(1004.9)
    clock.now += 30  # quiet for longer than the window
    quiet = hub.snapshot().get("c")
    assert quiet is not None
    assert quiet.rate == 0.0
    assert quiet.count == 50


def test_channel_limit_is_an_error_naming_the_channel_and_fix() -> None:
    hub = ChannelHub(max_channels=2)
    hub.publish("a", b"")
    hub.publish("b", b"")
    assert not hub.can_open("c")
    assert hub.can_open("a")
    with pytest.raises(ChannelLimitError, match=r"'c'.*limit of 2.*fix"):
        hub.publish("c", b"")
    # The engine's own channels never count: a flood of node channels cannot block them.
    assert hub.can_open("mvp.provisioning.logs.node.1.stdout")
    hub.publish("mvp.orch.bootstrap", b"{}")
    hub.publish("mvp.provisioning.logs.node.1.stdout", b"{}")
    assert len(hub.channels()) == 4


def test_listeners_get_every_frame_in_order() -> None:
    hub = ChannelHub()
    seen: list[Frame] = []
    hub.listeners.append(seen.append)
    frames = [hub.publish("a", b"1"), hub.publish("b", b"2")]
    assert seen == frames


def test_snapshot_is_sorted_and_uses_the_hub_stream_by_default() -> None:
    hub = ChannelHub(stream=StreamId("mvp-orchestrator", 5))
    hub.publish("z", b"")
    frame = hub.publish("a", b"")
    assert [c.channel for c in hub.snapshot().channels] == ["a", "z"]
    assert str(frame.stream) == "mvp-orchestrator#5"


def test_hub_memory_does_not_grow_with_volume_once_rings_are_full() -> None:
    import tracemalloc

    hub = ChannelHub(ring_frames=500)
    payload = b"x" * 100

    def publish(n: int) -> None:
        for _ in range(n):
            hub.publish("flood", payload)

    tracemalloc.start()
    try:
        publish(2_000)  # rings full
        before, _ = tracemalloc.get_traced_memory()
        publish(20_000)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 16 * 1024
    assert hub.snapshot().channels[0].count == 22_000

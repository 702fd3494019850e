"""Datastream ingest: node stdout lines through bridge + hub + archive, against raw json.loads.

Figures printed:
- per-line cost of the full ingest path (NodeBridge.feed_line, redacting with the run's
  secrets → ChannelHub.publish → FrameArchive.record) for each kind of line, and of
  `json.loads` on the same lines; the ratio raw/ours is the ingest speed as a fraction of
  raw parsing (target ≥ 1.0x);
- what the candidate fast parsers cost on the same lines (msgspec, the one the ingest path
  uses, and orjson when it is installed), the measurement that chose msgspec;
- frames/s, tracemalloc peak and RSS after `--frames` (default 1M) frames of a realistic mix;
- what the UI's poll costs: `snapshot()` and `tail()`;
- how fast a replay seek rebuilds the hub from the archive.

Per-line costs are CPU time (process_time), the best of `--rounds` alternating rounds, so a
busy neighbour on a shared machine distorts them less; frames/s figures are wall time.

Run: .venv/bin/python bench/bench_datastream.py [--frames 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.smoke import add_smoke  # noqa: E402
from mvp_tui.datastream.archive import FrameArchive  # noqa: E402
from mvp_tui.datastream.bridge import NodeBridge  # noqa: E402
from mvp_tui.datastream.frame import StreamId  # noqa: E402
from mvp_tui.datastream.frame_line import encode_frame_line  # noqa: E402
from mvp_tui.datastream.hub import ChannelHub  # noqa: E402
from mvp_tui.datastream.replay import ReplaySource  # noqa: E402
from mvp_tui.secrets import Redactor  # noqa: E402

# A run's bridge redacts every line with the run's secrets (provider key, HF token).
SECRETS = ["vast_4f9c2e7b1a0d5e6f8a7b6c5d4e3f2a1b", "hf_9a8b7c6d5e4f3a2b1c0d9e8f7a6b"]

ENGINE_LOG = "llama_model_loader: - kv {i:>3}: general.architecture str = llama"


def engine_line(i: int) -> bytes:
    """The bulk of a real run: the engine's log forwarded by the agent as string frames."""
    return (encode_frame_line("mvp.node.1.engine", ENGINE_LOG.format(i=i)) + "\n").encode()


def progress_line(i: int) -> bytes:
    """The agent's own records (phases, download progress): JSON object payloads."""
    payload = {"type": "NodeAgentProgress", "phase": "model", "bytes": i * 4096, "total": 10**9}
    return (encode_frame_line("mvp.node.1.agent", payload) + "\n").encode()


def plain_line(i: int) -> bytes:
    """Anything else the node prints (stderr): a log record on the node's log channel."""
    return b"load_tensors: offloading %d repeating layers to GPU\n" % i


def mixed(n: int) -> list[tuple[str, bytes]]:
    """A run's shape: 90% engine log frames, 5% agent records, 5% plain stderr lines."""
    out: list[tuple[str, bytes]] = []
    for i in range(n):
        if i % 20 == 0:
            out.append(("stdout", progress_line(i)))
        elif i % 20 == 1:
            out.append(("stderr", plain_line(i)))
        else:
            out.append(("stdout", engine_line(i)))
    return out


def ingest(
    lines: Iterable[tuple[str, bytes]], archive_path: Path, secrets: list[str] = SECRETS
) -> ChannelHub:
    archive = FrameArchive(archive_path)
    hub = ChannelHub(stream=StreamId("mvp-orchestrator", 7), archive=archive)
    bridge = NodeBridge(hub, 1, StreamId("1", 7), redactor=Redactor(secrets))
    feed = bridge.feed_line
    for kind, raw in lines:
        feed(kind, raw)
    archive.close()
    return hub


def best_of(rounds: int, *runs: Callable[[], None]) -> list[float]:
    """Best CPU time of each run over `rounds` alternating rounds."""
    best = [float("inf")] * len(runs)
    for _ in range(rounds):
        for index, run in enumerate(runs):
            gc.collect()
            start = time.process_time()
            run()
            best[index] = min(best[index], time.process_time() - start)
    return best


def compare(
    label: str,
    lines: list[tuple[str, bytes]],
    tmp: Path,
    rounds: int,
    secrets: list[str] = SECRETS,
) -> None:
    loads = json.loads

    def raw() -> None:
        for _, line in lines:
            loads(line)

    def ours() -> None:
        ingest(lines, tmp / f"{label}.jsonl", secrets).snapshot()
        (tmp / f"{label}.jsonl").unlink()

    raw_s, ours_s = best_of(rounds, raw, ours)
    n = len(lines)
    print(
        f"  {label:<22} json.loads {raw_s / n * 1e6:6.2f} µs/line   ingest {ours_s / n * 1e6:6.2f}"
        f" µs/line   speed vs raw {raw_s / ours_s:4.2f}x"
    )


def parsers(lines: list[bytes], rounds: int) -> None:
    """Parse only, no ingest: the standard library against the fast parsers on offer."""
    import msgspec

    from mvp_tui.datastream.frame_line import parse_frame_bytes

    candidates: dict[str, Callable[[bytes], object]] = {
        "json.loads": json.loads,
        "msgspec.json.decode": msgspec.json.decode,
        "parse_frame_bytes (msgspec, typed)": parse_frame_bytes,
    }
    try:
        import orjson  # type: ignore[import-not-found, unused-ignore]

        candidates["orjson.loads"] = orjson.loads
    except ImportError:
        print("  (orjson not installed: `pip install orjson` to compare it too)")
    stripped = [line.rstrip(b"\n") for line in lines]

    def run(parse: Callable[[bytes], object]) -> Callable[[], None]:
        return lambda: [parse(line) for line in stripped] and None

    costs = best_of(rounds, *(run(parse) for parse in candidates.values()))
    n = len(stripped)
    print("  parse only, the mix of frame lines:")
    for name, cost in zip(candidates, costs, strict=True):
        print(f"    {name:<36} {cost / n * 1e6:6.2f} µs/line")


def plain_cost(tmp: Path, n: int, rounds: int) -> None:
    lines = [("stderr", plain_line(i)) for i in range(n)]
    [ours_s] = best_of(rounds, lambda: ingest(lines, tmp / "plain.jsonl") and None)
    print(
        f"  {'plain stderr lines':<22} (not JSON)            ingest {ours_s / n * 1e6:6.2f} µs/line"
    )


def rss_kib() -> tuple[int, int]:
    """(current, peak) resident set size in KiB, from /proc."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


def volume(tmp: Path, frames: int) -> Path:
    chunk = 100_000
    path = tmp / "volume.jsonl"
    rss_before, _ = rss_kib()
    archive = FrameArchive(path)
    hub = ChannelHub(stream=StreamId("mvp-orchestrator", 7), archive=archive)
    bridge = NodeBridge(hub, 1, StreamId("1", 7))
    spent = 0.0
    for start in range(0, frames, chunk):  # lines made in chunks: the input is not measured
        lines = mixed(min(chunk, frames - start))
        began = time.perf_counter()
        for kind, raw in lines:
            bridge.feed_line(kind, raw)
        spent += time.perf_counter() - began
    archive.close()
    rss_after, rss_peak = rss_kib()
    retained = sum(c.retained for c in hub.snapshot().channels)
    print(
        f"  {frames:,} frames in {spent:.2f} s = {frames / spent:,.0f} frames/s "
        f"(archive {path.stat().st_size / 2**20:.0f} MiB)"
    )
    print(
        f"  RSS {rss_before / 1024:.1f} MiB before → {rss_after / 1024:.1f} MiB after "
        f"(peak {rss_peak / 1024:.1f} MiB); {retained:,} frames retained in rings"
    )

    gc.collect()
    tracemalloc.start()
    hub = ChannelHub(stream=StreamId("mvp-orchestrator", 7), archive=FrameArchive(tmp / "tm.jsonl"))
    bridge = NodeBridge(hub, 1, StreamId("1", 7))
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    for start in range(0, frames, chunk):
        lines = mixed(min(chunk, frames - start))
        line_bytes = tracemalloc.get_traced_memory()[0]
        for kind, raw in lines:
            bridge.feed_line(kind, raw)
        del lines
    assert hub.archive is not None
    hub.archive.close()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"  tracemalloc after {frames:,} frames: {(current - base) / 2**20:.2f} MiB held by the "
        f"hub, peak {(peak - base) / 2**20:.2f} MiB (incl. one {chunk:,}-line input chunk of "
        f"~{(line_bytes - base) / 2**20:.1f} MiB)"
    )
    return path


def ui_poll(rounds: int) -> None:
    hub = ChannelHub()
    for channel in range(20):
        for i in range(2000):
            hub.publish(f"mvp.node.{channel}.engine", b"line %d" % i)
    n = 2000
    [snap_s] = best_of(rounds, lambda: [hub.snapshot() for _ in range(n)] and None)
    [tail_s] = best_of(
        rounds, lambda: [hub.tail("mvp.node.3.engine", 1899) for _ in range(n)] and None
    )
    print(
        f"  snapshot() of 20 channels {snap_s / n * 1e6:.1f} µs; "
        f"tail() of 100 new frames {tail_s / n * 1e6:.1f} µs"
    )


def seek(path: Path, frames: int) -> None:
    """Index the archive (as a replay does in the background on opening), then seek to the
    end, the middle, back to the start and to scattered places: each seek's time from the
    request to the hub ready (what the next repaint shows), and memory after them."""

    async def first_seek(cold: bool) -> float:
        """A seek to the end issued as soon as the replay opened (before its index), with
        the archive's pages dropped from the cache first when `cold`."""
        if cold:
            with path.open("rb") as handle:
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        source = ReplaySource(path)
        source.pause()
        began = time.perf_counter()
        task = asyncio.create_task(source.feed(ChannelHub(), hold_at_end=True))
        source.seek(frames)  # before the feed first runs: its first idle is the seek landed
        await asyncio.wait_for(source.idle.wait(), 120)
        assert source.index == frames, (source.index, frames)
        took = time.perf_counter() - began
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return took

    async def run() -> None:
        cold, warm = await first_seek(cold=True), await first_seek(cold=False)
        print(
            f"  a seek to the end right after opening (no index yet): {cold * 1000:.0f} ms "
            f"with the archive's pages dropped from the cache, {warm * 1000:.0f} ms cached"
        )
        source = ReplaySource(path)
        source.pause()
        hub = ChannelHub()
        gc.collect()
        rss_before, _ = rss_kib()
        began = time.perf_counter()
        task = asyncio.create_task(source.feed(hub, hold_at_end=True))
        await source.idle.wait()
        index = source._index
        assert index is not None
        index.extend()  # what the background indexer finishes, timed as one piece
        built = time.perf_counter() - began
        print(
            f"  index of {index.end.record:,} records built in {built:.2f} s "
            f"({len(index.checkpoints)} checkpoints, one per {index.every:,} records)"
        )
        times: list[float] = []
        for target in (frames, frames // 2, 10, frames - 1, *(frames * k // 7 for k in range(7))):
            began = time.perf_counter()
            source.seek(target)
            await source.idle.wait()
            times.append(time.perf_counter() - began)
            assert source.index == min(target, index.end.record)
        rss_after, _ = rss_kib()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        ordered = sorted(times)
        print(
            f"  seek to record {frames:,}: {times[0] * 1000:.1f} ms; {len(times)} seeks "
            f"(end, middle, start, scattered): median {ordered[len(ordered) // 2] * 1000:.1f} ms,"
            f" worst {ordered[-1] * 1000:.1f} ms (target < 25 ms)"
        )
        print(
            f"  RSS {rss_before / 1024:.1f} MiB before the replay → {rss_after / 1024:.1f} MiB "
            "after indexing and seeking"
        )

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--lines", type=int, default=100_000, help="lines per ratio round")
    parser.add_argument("--rounds", type=int, default=5)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.frames, args.lines, args.rounds = 20_000, 2_000, 1
    with tempfile.TemporaryDirectory(prefix="bench-datastream-") as tmp_dir:
        tmp = Path(tmp_dir)
        n = args.lines
        print("ingest vs raw json.loads (best of rounds; target speed ≥ 1.00x):")
        compare(
            "engine log frames", [("stdout", engine_line(i)) for i in range(n)], tmp, args.rounds
        )
        compare(
            "agent record frames",
            [("stdout", progress_line(i)) for i in range(n)],
            tmp,
            args.rounds,
        )
        frame_mix = [x for x in mixed(n) if x[0] == "stdout"]
        compare("mix of frame lines", frame_mix, tmp, args.rounds)
        compare("the mix, no secrets", frame_mix, tmp, args.rounds, secrets=[])
        plain_cost(tmp, n, args.rounds)
        parsers([x[1] for x in mixed(n) if x[0] == "stdout"], args.rounds)
        print(f"volume ({args.frames:,} frames of the mix):")
        path = volume(tmp, args.frames)
        print("UI poll:")
        ui_poll(args.rounds)
        print("replay:")
        seek(path, args.frames)


if __name__ == "__main__":
    main()

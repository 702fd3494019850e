"""The frame archive reaches the OS as the seed's does (it flushes after every record):
records ingested in one turn of the event loop are written at the end of that turn, so a
`kill -9` of mvp-tui right after loses none of them. A real child process ingests frames
through the bridge and hub, says so, and is killed. Contract: 002_…txt `FrameArchive::record`
(`self.file.flush()` per record)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import asyncio, sys
from mvp_tui.datastream.archive import FrameArchive
from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.frame import StreamId
from mvp_tui.datastream.hub import ChannelHub

async def main():
    hub = ChannelHub(stream=StreamId("mvp-orchestrator", 7), archive=FrameArchive(sys.argv[1]))
    bridge = NodeBridge(hub, 1, StreamId("node", 7))
    for turn in range(3):  # three reads from the node's pipe, a few lines each
        for i in range(5):
            bridge.on_line("stdout", f"turn {turn} line {i}\n".encode())
        await asyncio.sleep(0)  # the loop turns: the next read
    print("ingested", flush=True)
    await asyncio.Event().wait()  # serving on; no close, no timer flush

asyncio.run(main())
"""


def test_frames_of_earlier_loop_turns_survive_a_kill(tmp_path: Path) -> None:
    archive = tmp_path / "frames.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(archive)], stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ingested"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    records = [json.loads(line) for line in archive.read_text().splitlines()]
    lines = [json.loads(r["payload"]["value"])["line"]["line"] for r in records]
    assert lines == [f"turn {t} line {i}" for t in range(3) for i in range(5)]
    assert [r["arrival_seq"] for r in records] == list(range(15))

"""The node's log reader and stopper (mvp_tui/node/follow.py, once ssh/node_helper.py): it
ships inside the agent's zipapp and runs as `python3 -S agent.pyz follow|stop ...`, loading
nothing of the agent and nothing outside the standard library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mvp_tui.agent_bundle import agent_zip
from mvp_tui.node import follow


def test_the_reader_is_standard_library_only() -> None:
    """It runs on the node with `python3 -S`: nothing but the standard library to import."""
    out = subprocess.run(
        [sys.executable, "-S", "-I", follow.__file__, "nonsense"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "usage" in out.stderr


def test_the_zipapp_stops_and_loads_none_of_the_agent(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", str(agent_zip()), "stop", str(tmp_path), "0.1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "not_started\n"
    loaded = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "mvp_tui.node.follow" in loaded
    assert not [m for m in loaded if m.startswith("mvp_tui.") and m != "mvp_tui.node.follow"
                and m not in ("mvp_tui.node", "mvp_tui.node.__main__")], loaded


def test_the_zipapp_follows_an_ended_agents_logs(tmp_path: Path) -> None:
    (tmp_path / follow.AGENT_PID).write_text("4242\n")
    (tmp_path / follow.STDOUT_LOG).write_bytes(b"skipped|out line\n")
    (tmp_path / follow.STDERR_LOG).write_bytes(b"err line\n")
    (tmp_path / follow.EXIT_CODE).write_text("2\n")
    done = subprocess.run(
        [sys.executable, "-S", str(agent_zip()), "follow", str(tmp_path), "8", "0", "0.01", "1"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == follow.EXIT_OK, done.stderr
    frames, data = [], done.stdout
    while data:
        kind, length = follow.HEADER.unpack(data[: follow.HEADER.size])
        body = data[follow.HEADER.size : follow.HEADER.size + length]
        frames.append((kind, body))
        data = data[follow.HEADER.size + length :]
    assert frames == [
        (follow.FRAME_PID, b"4242"),
        (follow.FRAME_STDOUT, b"out line\n"),
        (follow.FRAME_STDERR, b"err line\n"),
        (follow.FRAME_EXIT, b"2"),
    ]

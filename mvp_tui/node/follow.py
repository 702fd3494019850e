"""Runs ON THE NODE, from the agent's zipapp (`python3 -S agent.pyz follow|stop ...`, the
zip's `__main__` dispatches on the first argument): follow and stop the agent.

Standard library only, and nothing of mvp_tui (it starts with `-S`, beside the agent's own
start-up, and a reader that starts fast loses no line); Python 3.8-compatible, since the node
image owes us nothing but `python3`. The agent itself is started by `run.sh`
(mvp_tui/ssh/agent_launch.py), which records the files named below; mvp_tui/ssh/logtail.py
reads the frames. Two modes:

- `follow DIR OUT_POS ERR_POS POLL LAUNCH_TIMEOUT`: streams both logs from the given byte
  positions as frames on stdout (kind byte, 4-byte big-endian length, payload): `p` agent
  pid, `o` stdout bytes, `e` stderr bytes, `x` exit code (empty: unknown) once the agent
  ended and both logs are drained. It waits up to LAUNCH_TIMEOUT for the agent's pid. It
  exits when its stdin closes (the SSH channel went away), so it never outlives its session.
- `stop DIR GRACE`: `shutdown` on the control fifo, then SIGTERM, then SIGKILL, each after
  GRACE seconds; prints one word: shutdown, terminated, killed, not_running or not_started.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable
from typing import BinaryIO

CONTROL = "control"
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
AGENT_PID = "agent.pid"
WRAPPER_PID = "wrapper.pid"
EXIT_CODE = "exit_code"

FRAME_PID = b"p"
FRAME_STDOUT = b"o"
FRAME_STDERR = b"e"
FRAME_EXIT = b"x"
HEADER = struct.Struct(">cI")
FIRST_POLL = 0.002  # seconds; idle looks double from here up to the POLL argument
CHUNK = 65536
# The longest frame payload the reader accepts: this helper sends at most CHUNK, and a length
# from a hostile node (up to 4 GiB in the header) must not become an allocation.
MAX_FRAME_BYTES = 1 << 20

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NO_AGENT = 3  # the agent did not start (no pid within the launch timeout)
EXIT_NO_PYTHON = 5  # the launch found no python3 on the node (set by the launch script)


def write_atomic(name: str, text: str) -> None:
    tmp = name + ".tmp"
    with open(tmp, "w") as out:
        out.write(text)
    os.replace(tmp, name)


def read_int(name: str) -> int | None:
    try:
        with open(name) as src:
            return int(src.read().strip())
    except (OSError, ValueError):
        return None


def pid_running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Sender:
    """Frames to stdout; False once the channel is gone."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def __call__(self, kind: bytes, payload: bytes) -> None:
        self.stream.write(HEADER.pack(kind, len(payload)) + payload)
        self.stream.flush()


class Tail:
    """One log file read from a byte position on."""

    def __init__(self, name: str, position: int, kind: bytes) -> None:
        self.name = name
        self.position = position
        self.kind = kind
        self.fd: int | None = None

    def pump(self, send: Callable[[bytes, bytes], None]) -> bool:
        """Send what is new; True when something was."""
        if self.fd is None:
            try:
                self.fd = os.open(self.name, os.O_RDONLY)
            except FileNotFoundError:
                return False
            os.lseek(self.fd, self.position, os.SEEK_SET)
        data = os.read(self.fd, CHUNK)
        if not data:
            return False
        self.position += len(data)
        send(self.kind, data)
        return True


def stdin_closed(wait: float) -> bool:
    """Wait up to `wait` seconds; True when stdin reached EOF (our SSH channel closed)."""
    readable, _, _ = select.select([0], [], [], wait)
    if not readable:
        return False
    return os.read(0, 4096) == b""


def agent_ended() -> bool:
    """The agent's exit was recorded, or its parent died without recording it."""
    if os.path.exists(EXIT_CODE):
        return True
    pid = read_int(WRAPPER_PID)
    return pid is not None and not pid_running(pid)


def follow(argv: list[str]) -> int:
    directory, out_pos, err_pos, poll, launch_timeout = argv[:5]
    os.chdir(directory)
    send = Sender(sys.stdout.buffer)
    deadline = time.monotonic() + float(launch_timeout)
    pid = read_int(AGENT_PID)
    while pid is None and not os.path.exists(EXIT_CODE):
        if time.monotonic() > deadline:
            sys.stderr.write(f"no agent pid in {directory} within {launch_timeout}s\n")
            return EXIT_NO_AGENT
        if stdin_closed(FIRST_POLL):
            return EXIT_OK
        pid = read_int(AGENT_PID)
    try:
        if pid is not None:
            send(FRAME_PID, str(pid).encode())
        tails = [
            Tail(STDOUT_LOG, int(out_pos), FRAME_STDOUT),
            Tail(STDERR_LOG, int(err_pos), FRAME_STDERR),
        ]
        wait = FIRST_POLL
        while True:
            ended = agent_ended()
            moved = [tail.pump(send) for tail in tails]
            if any(moved):
                wait = FIRST_POLL  # output comes in bursts: look again soon
                continue
            if ended:
                code = read_int(EXIT_CODE)
                send(FRAME_EXIT, b"" if code is None else str(code).encode())
                return EXIT_OK
            if stdin_closed(wait):
                return EXIT_OK
            wait = min(wait * 2, float(poll))
    except BrokenPipeError:
        return EXIT_OK


def wait_gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while pid_running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def stop(directory: str, grace: float) -> str:
    os.chdir(directory)
    pid = read_int(AGENT_PID)
    if pid is None:
        return "not_started"
    if os.path.exists(EXIT_CODE) or not pid_running(pid):
        return "not_running"
    try:
        control = os.open(CONTROL, os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(control, b"shutdown\n")
        finally:
            os.close(control)
    except OSError:
        pass
    verdict = "shutdown"
    if not wait_gone(pid, grace):
        verdict = "terminated"
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not wait_gone(pid, grace):
            verdict = "killed"
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_gone(pid, grace)
    wrapper = read_int(WRAPPER_PID)
    if wrapper is not None:
        wait_gone(wrapper, grace)
    return verdict


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 6 and args[0] == "follow":
        return follow(args[1:])
    if len(args) == 3 and args[0] == "stop":
        sys.stdout.write(stop(args[1], float(args[2])) + "\n")
        return EXIT_OK
    sys.stderr.write("usage: agent.pyz follow|stop ...\n")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())

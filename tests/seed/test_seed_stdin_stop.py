"""Headless stops on a `stop`, `shutdown` or `quit` line on stdin, as the seed's listener
does (trimmed, any case; other lines and end of input are not a stop): the teardown is
confirmed and the exit code is 0. Contract: 002_…txt `spawn_stop_listener`."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from mvp_tui.engine.headless import is_stop_line, listen_for_stop
from tests.agent.procs import alive
from tests.seed.proc import clean_env, start_cli


@pytest.mark.parametrize("line", [b"stop\n", b"shutdown\n", b"quit\n", b"  QUIT \r\n", b"Stop"])
def test_the_seeds_stop_words_stop(line: bytes) -> None:
    assert is_stop_line(line)


@pytest.mark.parametrize("line", [b"\n", b"stopp\n", b"please stop\n", b"exit\n", b"\xff\n"])
def test_other_lines_do_not(line: bytes) -> None:
    assert not is_stop_line(line)


def pipe_with(data: bytes, close: bool = True) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    if close:
        os.close(write_fd)
    return read_fd, write_fd


async def test_the_listener_calls_back_once_at_the_first_stop_line() -> None:
    stopped = asyncio.Event()
    calls: list[int] = []

    def on_stop() -> None:
        calls.append(1)
        stopped.set()

    read_fd, write_fd = pipe_with(b"hello\nsto", close=False)
    thread = listen_for_stop(read_fd, asyncio.get_running_loop(), on_stop)
    os.write(write_fd, b"p\nquit\n")  # a line split across reads is still one line
    await asyncio.wait_for(stopped.wait(), 5)
    await asyncio.to_thread(thread.join, 5)
    assert calls == [1] and not thread.is_alive()
    os.close(write_fd)
    os.close(read_fd)


async def test_end_of_input_is_not_a_stop_but_a_last_unterminated_stop_is() -> None:
    calls: list[int] = []
    read_fd, _ = pipe_with(b"status\n")
    thread = listen_for_stop(read_fd, asyncio.get_running_loop(), lambda: calls.append(1))
    await asyncio.to_thread(thread.join, 5)
    assert not thread.is_alive() and calls == []
    os.close(read_fd)
    stopped = asyncio.Event()
    read_fd, _ = pipe_with(b"quit")  # `printf quit |`: no newline before the end
    listen_for_stop(read_fd, asyncio.get_running_loop(), stopped.set)
    await asyncio.wait_for(stopped.wait(), 5)
    os.close(read_fd)


async def test_a_run_with_nothing_on_stdin_exits_cleanly(tmp_path: Path) -> None:
    # The listener's thread is still blocked reading when the run ends: the exit is clean.
    args = ["up", "--headless", "--gguf-local-path", str(tmp_path / "none.gguf")]
    proc = await start_cli(args, clean_env(tmp_path / "state"))
    assert proc.stderr is not None
    err = await asyncio.wait_for(proc.stderr.read(), 60)  # stdin stays open meanwhile
    assert await proc.wait() == 2, err.decode()
    assert b"Fatal Python error" not in err


async def test_echo_stop_into_a_headless_run_ends_it_with_exit_0(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    # Literally `echo stop | mvp-tui up --headless …`, through a shell; the shell echoes once
    # the test saw the lease running (a line on a fifo), so the stop meets a lease to end.
    command = shlex.join(
        [
            sys.executable,
            "-m",
            "mvp_tui",
            "up",
            "--headless",
            "--gguf-local-path",
            str(tiny_gguf),
            "--rpc-bind",
            "127.0.0.1:0",
        ]
    )
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = clean_env(tmp_path / "state")
    proc = await asyncio.create_subprocess_shell(
        f"{{ read _ < {shlex.quote(str(gate))}; echo stop; }} | {command}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    try:
        events = []
        while not events or events[-1]["event"] != "lease_running":
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, "the run ended before its lease ran"
            events.append(json.loads(line))
        await asyncio.to_thread(gate.write_text, "leased\n")
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert "stopped by a stop line on stdin" in err.decode()
    events += [json.loads(line) for line in out.splitlines()]
    (finished,) = [e for e in events if e["event"] == "run_finished"]
    assert finished["exit_code"] == 0 and finished["leases_left"] == []
    names = [e["event"] for e in events]
    assert names.index("lease_running") < names.index("lease_deleted"), "torn down, confirmed"
    pids = [
        int(e["provider_id"].removeprefix("local-"))
        for e in events
        if e["event"] == "attempt_answered" and e.get("provider_id")
    ]
    assert pids and not any(alive(pid) for pid in pids)


async def test_stop_on_stdin_while_serving_tears_down_confirmed(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    args = ["up", "--headless", "--gguf-local-path", str(tiny_gguf), "--rpc-bind", "127.0.0.1:0"]
    proc = await start_cli(args, clean_env(tmp_path / "state"))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        seen = []
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, "the run ended before serving"
            seen.append(json.loads(line))
            if seen[-1]["event"] == "prompt_rpc_listening":
                break
        proc.stdin.write(b"shutdown\n")
        await proc.stdin.drain()
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    events = seen + [json.loads(line) for line in out.splitlines()]
    names = [e["event"] for e in events]
    assert names.index("lease_running") < names.index("lease_deleted")
    (finished,) = [e for e in events if e["event"] == "run_finished"]
    assert finished["exit_code"] == 0 and finished["leases_left"] == []

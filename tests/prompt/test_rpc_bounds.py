"""The prompt RPC's bounds before a connection shows its token (security read F6): the first
line comes within a deadline, and only so many such connections are held at once (the one
waiting longest is closed for a newcomer), so an unauthenticated local user cannot use up the
dashboard's descriptors; the app raises its soft open-files limit at start. Real loopback
sockets; no engine (the queue is never started, so a prompt waits until cancelled)."""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.prompt.events import PromptQueued
from mvp_tui.prompt.queue import PromptQueue
from mvp_tui.prompt.rpc import PromptRpcServer, RpcAddr
from tests.prompt.waiting import WaitingSink

TOKEN = "mvp-rpc-token-for-the-bounds-tests"
Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _NeverAnswers:
    """A prompt client whose answer never comes: a prompt stays active until cancelled."""

    def stream(self, messages: Any, max_tokens: int, *, prompt_id: int, **sampling: Any) -> Any:
        return self._never()

    async def _never(self) -> AsyncIterator[Any]:
        await asyncio.Event().wait()
        yield None


@pytest.fixture
def sink() -> WaitingSink:
    return WaitingSink()


@pytest.fixture
async def queue(sink: WaitingSink) -> AsyncIterator[PromptQueue]:
    queue = PromptQueue(lambda: _NeverAnswers(), sink)  # type: ignore[arg-type, return-value]
    yield queue
    await queue.aclose()


async def _queued(sink: WaitingSink, request_id: int) -> int:
    """The prompt id of the RPC request `request_id`, once the server has queued it."""
    event = await sink.first(
        lambda e: isinstance(e, PromptQueued) and e.request_id == request_id, 3)
    assert isinstance(event, PromptQueued)
    return event.prompt_id


async def _served(queue: PromptQueue, **bounds: Any) -> tuple[PromptRpcServer, RpcAddr]:
    rpc = PromptRpcServer(queue, RpcAddr("127.0.0.1", 0), token=TOKEN, **bounds)
    return rpc, await rpc.start()


async def _connect(addr: RpcAddr) -> Conn:
    return await asyncio.open_connection(addr.host, addr.port)


async def _ended(conn: Conn, within: float = 3.0) -> bytes:
    """Everything the server sent until it closed the connection (bounded)."""
    return await asyncio.wait_for(conn[0].read(), within)


def _submit(request_id: int) -> bytes:
    line = {"request_id": request_id, "prompt_text": "hi", "max_tokens": 4, "token": TOKEN}
    return json.dumps(line).encode() + b"\n"


async def test_a_silent_connection_is_closed_at_the_first_line_deadline(
    queue: PromptQueue,
) -> None:
    rpc, addr = await _served(queue, first_line_s=0.3)
    try:
        silent = await _connect(addr)
        sent = await _ended(silent)
        fault = json.loads(sent)
        assert fault["type"] == "fault" and "no request line within 0.3 s" in fault["error"]
        dripping = await _connect(addr)
        dripping[1].write(b'{"request_id": 1, "prompt_te')  # a line begun, never ended
        assert b"no request line" in await _ended(dripping)
    finally:
        await rpc.aclose()


async def test_connections_without_the_token_are_capped_and_the_holder_still_gets_in(
    queue: PromptQueue, sink: WaitingSink
) -> None:
    rpc, addr = await _served(queue, max_unproven=4, first_line_s=30.0)
    crowd: list[Conn] = []
    try:
        holder = await _connect(addr)
        holder[1].write(_submit(7))  # shows the token: no longer counts against the cap
        await holder[1].drain()
        first = await _queued(sink, 7)
        for _ in range(10):
            crowd.append(await _connect(addr))
        # Ten silent newcomers, four held: the six that waited longest were closed, unread.
        for conn in crowd[:6]:
            assert await _ended(conn) == b""
        # The token holder's connection stayed: its prompt, cancelled, answers on it.
        assert queue.cancel(first)
        line = json.loads(await asyncio.wait_for(holder[0].readline(), 3))
        assert (line["type"], line["request_id"]) == ("fault", 7)
        assert "cancelled" in line["error"]
        # And a newcomer with the token gets in past the still-full crowd.
        late = await _connect(addr)
        late[1].write(_submit(8))
        await late[1].drain()
        assert await _ended(crowd[6]) == b""  # the longest waiting made room
        assert queue.cancel(await _queued(sink, 8))
        assert json.loads(await asyncio.wait_for(late[0].readline(), 3))["request_id"] == 8
    finally:
        for _, writer in crowd:
            writer.close()
        await rpc.aclose()


def test_the_app_raises_its_soft_open_files_limit_at_start(tmp_path: Path) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip(f"the hard open-files limit here is {hard}: nothing to raise")

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    code = ("import resource, sys\nfrom mvp_tui.cli import main\nmain(['config'])\n"
            "print('soft', resource.getrlimit(resource.RLIMIT_NOFILE)[0], file=sys.stderr)\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MVP_STATE_DIR": str(tmp_path / "s"),
           "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, preexec_fn=low, timeout=60)
    assert done.returncode == 0, done.stderr
    raised = int(done.stderr.split("soft ")[-1])
    assert raised > 256 and (hard == resource.RLIM_INFINITY or raised <= hard)

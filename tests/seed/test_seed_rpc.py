"""The prompt RPC's bind rule and its replies for bad input. Loopback is the default; a
non-loopback `--rpc-bind` needs an explicit acknowledgement that the RPC has no
authentication, else exit 2 with the fix. Bad input gets one `fault` line, then the
connection closes (the seed closes it without a line: docs "Compatibility with the
seed"). Contract: 002_…txt `spawn_prompt_rpc`, `handle_prompt_connection`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.queue import PromptQueue
from mvp_tui.prompt.rpc import PromptRpcServer, RpcAddrError, parse_rpc_addr


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    return subprocess.run(
        [sys.executable, "-m", "mvp_tui", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=60,
    )


def test_a_non_loopback_rpc_bind_without_acknowledgement_exits_2_with_the_fix() -> None:
    result = cli("--rpc-bind", "0.0.0.0:19777", "config")
    assert result.returncode == 2
    assert "[prompt] rpc_addr = '0.0.0.0:19777' from flag --rpc-bind" in result.stderr
    assert "no authentication" in result.stderr
    assert "--rpc-bind-unauthenticated" in result.stderr


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--rpc-bind", "0.0.0.0:19777", "--rpc-bind-unauthenticated"], {}),
        (["--rpc-bind", "0.0.0.0:19777"], {"MVP_PROMPT_RPC_ALLOW_REMOTE": "true"}),
    ],
)
def test_an_acknowledged_non_loopback_rpc_bind_is_accepted(
    args: list[str], env: dict[str, str]
) -> None:
    result = cli(*args, "config", env=env)
    assert result.returncode == 0, result.stderr
    assert 'rpc_addr = "0.0.0.0:19777"' in result.stdout


def test_the_key_in_a_file_acknowledges_too(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[prompt]\nrpc_addr = "0.0.0.0:19777"\nrpc_allow_remote = true\n')
    assert cli("--config", str(path), "config").returncode == 0


def test_loopback_stays_the_default() -> None:
    result = cli("config")
    assert result.returncode == 0
    assert 'rpc_addr = "127.0.0.1:19777"' in result.stdout
    assert "rpc_allow_remote = false" in result.stdout


TOKEN = "mvp-rpc-token-for-these-tests"


def _queue(seen: list[object] | None = None) -> PromptQueue:
    def no_engine() -> PromptClient:
        raise AssertionError("no prompt may reach the engine")

    return PromptQueue(no_engine, (seen if seen is not None else []).append)


async def test_the_server_binds_a_non_loopback_address_only_when_acknowledged() -> None:
    with pytest.raises(RpcAddrError, match="rpc-bind-unauthenticated"):
        parse_rpc_addr("0.0.0.0:0")
    queue = _queue()
    server = PromptRpcServer(queue, parse_rpc_addr("0.0.0.0:0", allow_remote=True), token=TOKEN)
    bound = await server.start()
    try:
        assert bound.host == "0.0.0.0" and bound.port > 0
    finally:
        await server.aclose()
        await queue.aclose()


@pytest.mark.parametrize(
    "line",
    [b"not json\n", b'{"request_id": -1, "prompt_text": "x"}\n', b'{"request_id": 3}\n'],
)
async def test_bad_input_gets_one_fault_line_then_the_connection_closes(line: bytes) -> None:
    queue = _queue()
    server = PromptRpcServer(queue, parse_rpc_addr("127.0.0.1:0"), token=TOKEN)
    bound = await server.start()
    try:
        reader, writer = await asyncio.open_connection(bound.host, bound.port)
        writer.write(line.replace(b"}", b', "token": "%s"}' % TOKEN.encode()))
        await writer.drain()
        reply = json.loads(await asyncio.wait_for(reader.readline(), 10))
        assert set(reply) == {"type", "request_id", "error"} and reply["type"] == "fault"
        assert reply["error"].startswith("parse prompt request:")
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, as the seed does
        writer.close()
    finally:
        await server.aclose()
        await queue.aclose()


@pytest.mark.parametrize(
    "line",
    [b'{"request_id": 5, "prompt_text": "x"}\n',
     b'{"request_id": 5, "prompt_text": "x", "token": "mvp-rpc-guessed"}\n',
     b'{"request_id": 5, "prompt_text": "x", "token": 7}\n'],
)
async def test_a_request_without_the_runs_token_is_refused_and_never_queued(line: bytes) -> None:
    seen: list[object] = []
    queue = _queue(seen)
    server = PromptRpcServer(queue, parse_rpc_addr("127.0.0.1:0"), token=TOKEN, sink=seen.append)
    bound = await server.start()
    try:
        reader, writer = await asyncio.open_connection(bound.host, bound.port)
        writer.write(line)
        await writer.drain()
        reply = json.loads(await asyncio.wait_for(reader.readline(), 10))
        assert reply["type"] == "fault" and reply["request_id"] == 0
        assert "prompt RPC refused the request" in reply["error"]
        assert "mvp-tui endpoint --env" in reply["error"] and TOKEN not in reply["error"]
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed
        writer.close()
    finally:
        await server.aclose()
        await queue.aclose()
    assert [type(e).__name__ for e in seen] == ["PromptRpcListening"]  # nothing queued


def test_a_server_without_a_token_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a token"):
        PromptRpcServer(_queue(), parse_rpc_addr("127.0.0.1:0"), token="")

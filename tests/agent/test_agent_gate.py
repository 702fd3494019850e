"""The agent's gate: the engine's public port admits only the run's key, counts uses, and
the idle stop ends a node nobody uses (real engines: llama_cpp.server and llama-server)."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.node_protocol import webui_host, webui_login_code
from tests.agent.agent_run import AgentRun, agent_env
from tests.peers import require_llama_rpc

KEY = "mvp-run-key-never-printed-0b7e44d2"
CHAT = {"model": "tiny", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


def _call(
    port: int,
    path: str,
    *,
    body: object = None,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    method: str | None = None,
) -> tuple[int, bytes, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = dict(headers or {})
    if key is not None:
        sent["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        sent["Content-Type"] = "application/json"
    conn.request(method or ("POST" if data is not None else "GET"), path, data, sent)
    answer = conn.getresponse()
    payload = answer.read()
    conn.close()
    return answer.status, payload, answer


def _cmdlines() -> bytes:
    out = b""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                out += Path(f"/proc/{pid}/cmdline").read_bytes() + b"\n"
    return out


async def _keyed_node(env: dict[str, str]) -> tuple[AgentRun, dict[str, Any]]:
    run = await AgentRun.start(env)
    loaded = await run.weights(within=60)
    assert loaded["type"] == "WeightsLoaded", loaded
    return run, loaded


async def _refuses_all_but_the_key(run: AgentRun, loaded: dict[str, Any]) -> None:
    port = loaded["port"]
    assert loaded["auth"] == "key"
    status, body, _ = await asyncio.to_thread(_call, port, "/v1/chat/completions", body=CHAT)
    assert status == 401 and b"API key" in body
    status, _, _ = await asyncio.to_thread(
        _call, port, "/v1/chat/completions", body=CHAT, key="wrong-key-0000000000"
    )
    assert status == 401
    status, _, _ = await asyncio.to_thread(_call, port, "/v1/models")
    assert status == 401
    status, body, _ = await asyncio.to_thread(
        _call, port, "/v1/chat/completions", body=CHAT, key=KEY
    )
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"]
    # A streamed chat comes through whole, event by event, ending with [DONE].
    status, body, answer = await asyncio.to_thread(
        _call, port, "/v1/chat/completions", body={**CHAT, "stream": True}, key=KEY
    )
    assert status == 200 and answer.getheader("Content-Type", "").startswith("text/event-stream")
    assert body.count(b"data: ") >= 8 and body.rstrip().endswith(b"data: [DONE]")
    # DNS rebinding: a page on another name reaching the port, even with the key.
    status, _, _ = await asyncio.to_thread(
        _call, port, "/v1/models", key=KEY, headers={"Host": f"evil.example:{port}"}
    )
    assert status == 403
    # The web UI's login, on its own name: a one-time code (not the key) gives a cookie for
    # the UI's own requests (tests/agent/test_gate_bounds.py holds every rule of it).
    ui = f"{webui_host(KEY)}:{port}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/mvp/webui", f"code={webui_login_code(KEY, time.time())}",
                 {"Content-Type": "application/x-www-form-urlencoded", "Host": ui})
    login = conn.getresponse()
    login.read()
    cookie = (login.getheader("Set-Cookie") or "").split(";")[0]
    assert login.status == 200, login.status
    assert cookie.startswith("mvp_webui=") and KEY not in cookie
    own = {"Cookie": cookie, "Host": ui, "Sec-Fetch-Site": "same-origin"}
    status, _, _ = await asyncio.to_thread(_call, port, "/v1/models", headers=own)
    assert status == 200
    foreign = {**own, "Origin": "http://evil.example"}
    status, _, _ = await asyncio.to_thread(_call, port, "/v1/models", headers=foreign)
    assert status == 401  # another origin's request riding the cookie
    assert KEY.encode() not in _cmdlines()
    await run.send("shutdown\n")
    assert await run.wait_exit() == 0
    assert KEY.encode() not in bytes(run.stdout + run.stderr)


@pytest.mark.usefixtures("real_engine")
async def test_llama_cpp_python_behind_the_gate(tmp_path: Path, tiny_model: Path) -> None:
    env = agent_env(tmp_path, MVP_GGUF_LOCAL_PATH=str(tiny_model), MVP_API_KEY=KEY)
    run, loaded = await _keyed_node(env)
    try:
        assert loaded["engine"] == "llama-cpp-python"
        private = run.phase_detail("engine_start", "ready")["port"]
        assert private != loaded["port"]
        # Its private port is no way around the gate for another local user (provider
        # local): llama_cpp.server has the key too, from its environment, not argv.
        for path, body in (("/v1/chat/completions", CHAT), ("/v1/models", None)):
            status, _, _ = await asyncio.to_thread(_call, private, path, body=body)
            assert status == 401, path
        status, _, _ = await asyncio.to_thread(_call, private, "/v1/models", key=KEY)
        assert status == 200
        await _refuses_all_but_the_key(run, loaded)
    finally:
        await run.kill()


async def test_llama_server_checks_the_key_itself(tmp_path: Path, tiny_model: Path) -> None:
    bin_dir = require_llama_rpc()
    env = agent_env(
        tmp_path,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        MVP_API_KEY=KEY,
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    run, loaded = await _keyed_node(env)
    try:
        assert loaded["engine"] == "llama-server"
        private = run.phase_detail("engine_start", "ready")["port"]
        assert private != loaded["port"]
        # Its private port is no way around the gate: llama-server wants the key too.
        status, _, _ = await asyncio.to_thread(
            _call, private, "/v1/chat/completions", body=CHAT
        )
        assert status == 401
        await _refuses_all_but_the_key(run, loaded)
    finally:
        await run.kill()


def _idle_stop(frame: tuple[str, Any], state: str) -> bool:
    _channel, payload = frame
    return isinstance(payload, dict) and payload.get("state") == state


@pytest.mark.usefixtures("real_engine")
async def test_idle_stop_ends_a_node_nobody_uses(tmp_path: Path, tiny_model: Path) -> None:
    env = agent_env(
        tmp_path,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        MVP_API_KEY=KEY,
        MVP_NODE_PROVIDER="local",
        MVP_IDLE_STOP_MINS="0.03",  # 1.8 s
    )
    run, loaded = await _keyed_node(env)
    try:
        assert loaded["idle_stop_mins"] == 0.03
        await run.wait_for(lambda c, p: _idle_stop((c, p), "idle_stop_warning"), within=10)
        fired = await run.wait_phase("watchdog", "started", within=10)
        assert fired["detail"]["trigger"] == "idle_stop", fired
        assert fired["detail"]["unused_s"] >= 1.8
        assert await run.wait_exit() == 0
        ended = run.find(
            lambda c, p: isinstance(p, dict) and p.get("phase") == "watchdog"
            and p.get("status") == "ready" and (p.get("detail") or {}).get("ended") is True
        )
        assert ended is not None and ended["detail"]["trigger"] == "idle_stop"
    finally:
        await run.kill()


@pytest.mark.usefixtures("real_engine")
async def test_idle_stop_waits_while_requests_come(tmp_path: Path, tiny_model: Path) -> None:
    env = agent_env(
        tmp_path,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        MVP_API_KEY=KEY,
        MVP_NODE_PROVIDER="local",
        MVP_IDLE_STOP_MINS="0.03",
    )
    run, loaded = await _keyed_node(env)
    try:
        loop = asyncio.get_running_loop()
        until = loop.time() + 5.0  # well past the 1.8 s window
        while loop.time() < until:
            status, _, _ = await asyncio.to_thread(
                _call, loaded["port"], "/v1/chat/completions", body=CHAT, key=KEY
            )
            assert status == 200
            await asyncio.sleep(0.5)  # a client's pace, not a synchronisation
        assert run.find(lambda c, p: _idle_stop((c, p), "idle_stop_warning")) is None
        assert ("watchdog", "started") not in run.phases()
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()


@pytest.mark.usefixtures("real_engine")
async def test_a_kept_lease_keeps_its_idle_stop_and_use_postpones_it(
    tmp_path: Path, tiny_model: Path
) -> None:
    env = agent_env(
        tmp_path,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        MVP_API_KEY=KEY,
        MVP_NODE_PROVIDER="local",
        MVP_IDLE_TEARDOWN_MINS="30",
        MVP_IDLE_STOP_MINS="0.05",  # 3 s
    )
    run, _loaded = await _keyed_node(env)
    try:
        await run.send("detach\n")  # kept on purpose: the silence switch stands down
        await run.wait_for(lambda c, p: _idle_stop((c, p), "idle_stop_warning"), within=10)
        await run.send("use\n")  # a key in the dashboard
        await run.wait_for(lambda c, p: _idle_stop((c, p), "idle_stop_postponed"), within=10)
        fired = await run.wait_phase("watchdog", "started", within=10)
        assert fired["detail"]["trigger"] == "idle_stop"
        assert fired["detail"]["idle_armed"] is False  # the silence switch stood down
        warnings = [p for c, p in run.frames if _idle_stop((c, p), "idle_stop_warning")]
        assert len(warnings) == 2  # warned again after the postponement
        assert await run.wait_exit() == 0
    finally:
        await run.kill()


@pytest.mark.usefixtures("real_engine")
async def test_a_custom_engine_is_served_through_the_gate(tmp_path: Path, tiny_model: Path) -> None:
    command = (
        "{python} -m llama_cpp.server --model {model} --host {host} --port {port} "
        "--model_alias {alias} --n_ctx 256 --n_threads 1 --interrupt_requests False"
    )
    env = agent_env(tmp_path, MVP_GGUF_LOCAL_PATH=str(tiny_model), MVP_API_KEY=KEY,
                    MVP_ENGINE_CMD=command)
    run, loaded = await _keyed_node(env)
    try:
        assert loaded["engine"] == "custom"  # it cannot take a key: the gate checks it
        await _refuses_all_but_the_key(run, loaded)
    finally:
        await run.kill()


@pytest.mark.parametrize(
    ("host", "admitted"),
    [("127.0.0.1:8642", True), ("localhost:8642", True), ("[::1]:8642", True),
     ("127.0.0.1", True), ("evil.example:8642", False), ("127.0.0.1.evil.example", False),
     ("", False), ("[::1", False), ("localhost:80@evil", False), ("[::1]x", False),
     ("mvp-0123.localhost:8642", False)],
)
def test_the_gate_answers_only_loopback_names(host: str, admitted: bool) -> None:
    from mvp_tui.node.gate import _loopback_host

    assert _loopback_host(host) is admitted

"""Slots for parallel use (issue 40), on local runs (`mvp-tui up --headless`, provider local):
with `[model] parallel` = 6, six streams at once through the run's endpoint (the node's gate,
the run's key) reach llama-server (the fake, which serves `-np` slots and, unset, the pinned
build's auto 4) and all stream together; with llama-cpp-python's server, which serves one
request at a time, the endpoint line and `mvp-tui endpoint` say so."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from mvp_tui.lease.endpoint_record import load_endpoint
from mvp_tui.lease.records import RecordStore
from tests.e2e.headless import HeadlessRun, event
from tests.fakes.tiny_gguf import write_tiny_gguf

ROOT = Path(__file__).resolve().parents[1]
FAKE_SERVER = ROOT / "agent" / "fake_llama_server.py"
STREAMS = 6


def _fake_server_bin(bin_dir: Path) -> Path:
    bin_dir.mkdir()
    server = bin_dir / "llama-server"
    server.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_SERVER}" "$@"\n')
    server.chmod(0o755)
    return bin_dir


def _stream(base_url: str, key: str) -> bytes:
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    assert answer.status == 200, data
    return data


async def test_the_endpoint_carries_parallel_streams_at_once(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf", seed=0)
    bin_dir = _fake_server_bin(tmp_path / "bin")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOADING_PROBES": "0",
           "FAKE_STREAMS_TOGETHER": str(STREAMS), "MVP_PROVIDER": "local",
           "MVP_MAX_CONTEXT": "256"}
    args = ["--gguf-local-path", str(model), "--rpc-bind", "127.0.0.1:0",
            "--parallel", str(STREAMS)]
    state = tmp_path / "state"
    async with HeadlessRun(args, state, env=env) as run:
        ready = await run.until(event("endpoint_ready"), within=60)
        assert ready["auth"] == "key" and ready["slots"] == STREAMS
        endpoint = load_endpoint(RecordStore(state), ready["run_id"])
        assert endpoint is not None and endpoint.slots == STREAMS
        answers = await asyncio.gather(*(
            asyncio.to_thread(_stream, ready["base_url"], endpoint.api_key)
            for _ in range(STREAMS)))
        run.signal(signal.SIGTERM)
        await run.finish(within=60)
    # Each stream sent its tokens only once all six held a slot at the same time.
    for data in answers:
        assert b"answer" in data and data.rstrip().endswith(b"data: [DONE]"), data
    assert f"OpenAI endpoint {ready['base_url']}/v1" in run.stderr
    assert f"{STREAMS} requests at once" in run.stderr
    # The engine got the slots, each with the whole context (its log, on its channel).
    said = [r for r in run.records if r.get("event") == "frame" and ".engine" in r["channel"]]
    assert any("n_slots = 6, n_ctx_slot = 256" in json.dumps(r) for r in said), said[:3]


async def test_llama_cpp_python_says_one_request_at_a_time(
    tmp_path: Path, tiny_gguf: Path
) -> None:
    model = tiny_gguf
    env = {"PATH": "/usr/bin:/bin", "MVP_PROVIDER": "local", "MVP_NODE_PYTHON": sys.executable,
           "MVP_MAX_CONTEXT": "256"}
    args = ["--gguf-local-path", str(model), "--rpc-bind", "127.0.0.1:0"]
    state = tmp_path / "state"
    async with HeadlessRun(args, state, env=env) as run:
        ready = await run.until(event("endpoint_ready"), within=90)
        clean = {k: v for k, v in os.environ.items() if not k.startswith("MVP_")}
        shown = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "mvp_tui", "endpoint"],
            env={**clean, "MVP_STATE_DIR": str(state)}, capture_output=True, text=True,
            timeout=60, check=False)
        run.signal(signal.SIGTERM)
        await run.finish(within=60)
    assert ready["slots"] == 1
    (line,) = [x for x in run.stderr.splitlines() if "OpenAI endpoint" in x]
    assert "one request at a time" in line, line
    assert shown.returncode == 0, shown.stderr
    assert "serves   one request at a time" in shown.stdout, shown.stdout


async def test_unset_a_local_run_gets_as_many_slots_as_fit_at_most_four(tmp_path: Path) -> None:
    """The run reads the local model's fit before it starts the node (a few MiB of KV cache a
    slot here, GBs of RAM free): four slots, each with the whole context."""
    model = write_tiny_gguf(tmp_path / "tiny.gguf", seed=0)
    bin_dir = _fake_server_bin(tmp_path / "bin")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOADING_PROBES": "0",
           "MVP_PROVIDER": "local", "MVP_MAX_CONTEXT": "256"}
    args = ["--gguf-local-path", str(model), "--rpc-bind", "127.0.0.1:0"]
    async with HeadlessRun(args, tmp_path / "state", env=env) as run:
        ready = await run.until(event("endpoint_ready"), within=60)
        run.signal(signal.SIGTERM)
        await run.finish(within=60)
    assert ready["slots"] == 4
    said = [r for r in run.records if r.get("event") == "frame" and ".engine" in r["channel"]]
    assert any("n_slots = 4, n_ctx_slot = 256" in json.dumps(r) for r in said), said[:3]

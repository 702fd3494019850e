"""A whole run on this machine, headless: lease the local node, serve a real model with
llama.cpp's server, stream prompts, tear down — as a user runs `mvp-tui up --headless`."""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mvp_tui.datastream.archive import read_archive
from tests.agent.procs import alive
from tests.e2e.headless import HeadlessRun, event, weights


def _pids(run: HeadlessRun) -> list[int]:
    agent = [
        int(e["provider_id"].removeprefix("local-"))
        for e in run.events("attempt_answered")
        if e.get("provider_id")
    ]
    engine = [
        f["payload"]["engine_pid"]
        for f in run.frames("mvp.worker.weights")
        if f["payload"].get("engine_pid")
    ]
    return agent + engine


async def test_local_run_streams_a_prompt_and_leaves_no_process(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "frames.jsonl"
    args = [
        "--gguf-local-path",
        str(tiny_gguf),
        "--prompt",
        "hello there",
        "--max-tokens",
        "16",
        "--datastream-frame-log",
        str(archive),
        "--rpc-bind",
        "127.0.0.1:0",
    ]
    async with HeadlessRun(args, tmp_path / "state") as run:
        code = await run.finish()
    assert code == 0, run.stderr
    assert run.frames("mvp.worker.weights")[0]["payload"]["type"] == "WeightsLoaded"
    (ready,) = run.events("node_ready")
    assert ready["local_url"].startswith("http://127.0.0.1:")
    (done,) = run.events("prompt_done")
    assert done["tokens_generated"] >= 1 and done["final_text"]
    assert done["elapsed_ms"] > 0 and done["ttft_ms"] is not None
    deltas = "".join(e["text"] for e in run.events("text_delta"))
    assert deltas == done["final_text"]
    assert run.events("lease_deleted") and run.events("run_finished")[-1]["exit_code"] == 0
    phases = [
        (f["payload"]["phase"], f["payload"]["status"]) for f in run.frames("mvp.orch.bootstrap")
    ]
    for step in [
        ("config", "ready"),
        ("offers", "ready"),
        ("provider_start", "started"),
        ("provider_start", "ready"),
        ("weights_loaded", "ready"),
        ("provider_stop", "started"),
        ("provider_stop", "ready"),
    ]:
        assert step in phases, (step, phases)
    assert phases.index(("provider_start", "ready")) < phases.index(("weights_loaded", "ready"))
    prompt_phases = {f["payload"]["phase"] for f in run.frames("mvp.orch.prompt")}
    assert prompt_phases, "prompt steps are recorded on mvp.orch.prompt"
    pids = _pids(run)
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)
    # The archive kept every frame that was printed: same channels, same counts.
    printed = Counter(r["channel"] for r in run.records if r.get("event") == "frame")
    archived = Counter(rec.frame.channel for rec in read_archive(archive))
    for channel, count in printed.items():
        assert archived[channel] == count, channel


async def test_missing_model_path_fails_before_any_process(tmp_path: Path) -> None:
    async with HeadlessRun(
        ["--gguf-local-path", str(tmp_path / "none.gguf")], tmp_path / "state"
    ) as run:
        code = await run.finish()
    assert code == 2
    assert "[model] gguf_local_path" in run.stderr and "does not exist" in run.stderr
    assert not run.events("attempt_started")
    assert not (tmp_path / "state" / "runs").exists() or not any(
        (tmp_path / "state" / "runs").iterdir()
    )


async def test_engine_killed_is_worker_fatal_teardown_and_exit_1(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    args = ["--gguf-local-path", str(tiny_gguf), "--rpc-bind", "127.0.0.1:0"]
    async with HeadlessRun(args, tmp_path / "state") as run:
        loaded = await run.until(weights("WeightsLoaded"))
        await run.until(event("prompt_rpc_listening"))
        import os

        os.kill(loaded["payload"]["engine_pid"], signal.SIGKILL)
        fatal = await run.until(weights("WorkerFatal"))
        code = await run.finish()
    assert "engine exited unexpectedly" in fatal["payload"]["reason"]
    assert code == 1
    assert run.events("node_failed") and run.events("lease_deleted")
    assert not any(alive(pid) for pid in _pids(run))


async def test_sigterm_tears_down_before_exit(tiny_gguf: Path, tmp_path: Path) -> None:
    args = ["--gguf-local-path", str(tiny_gguf), "--rpc-bind", "127.0.0.1:0"]
    async with HeadlessRun(args, tmp_path / "state") as run:
        await run.until(event("prompt_rpc_listening"))
        run.signal(signal.SIGTERM)
        code = await run.finish()
    assert code == 0  # serving until a signal is the plan: a signal ends it cleanly
    assert run.events("lease_deleted")
    assert run.events("run_finished")[-1]["reason"].startswith("stopped by SIGTERM")
    assert not any(alive(pid) for pid in _pids(run))


async def test_rpc_serves_a_socket_client_and_an_overlong_prompt_faults(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    args = ["--gguf-local-path", str(tiny_gguf), "--rpc-bind", "127.0.0.1:0", "--max-context", "64"]
    async with HeadlessRun(args, tmp_path / "state") as run:
        listening = await run.until(event("prompt_rpc_listening"))
        # A local user without the run's token is refused (the dashboard would add the key).
        reader, writer = await asyncio.open_connection("127.0.0.1", listening["port"])
        writer.write(b'{"request_id": 1, "prompt_text": "hi", "max_tokens": 8}\n')
        refused = json.loads(await asyncio.wait_for(reader.readline(), 60))
        assert refused["type"] == "fault" and "token" in refused["error"], refused
        assert await asyncio.wait_for(reader.read(), 60) == b""
        writer.close()
        # `mvp-tui endpoint --env` tells a tool where the RPC is and its token.
        shown = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "mvp_tui", "endpoint", "--env"],
            env=run.env, capture_output=True, text=True, timeout=60, check=False)
        assert shown.returncode == 0, shown.stderr
        told = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1)
                    for line in shown.stdout.splitlines())
        assert told["MVP_PROMPT_RPC_ADDR"] == f"127.0.0.1:{listening['port']}"
        token = told["MVP_PROMPT_RPC_TOKEN"]
        reader, writer = await asyncio.open_connection("127.0.0.1", listening["port"])
        lines = []
        for request_id, prompt in enumerate(("word " * 400, "hi"), start=1):
            request = {"request_id": request_id, "prompt_text": prompt, "max_tokens": 8,
                       "token": token}
            writer.write(json.dumps(request).encode() + b"\n")
            await writer.drain()
            while True:
                line = json.loads(await asyncio.wait_for(reader.readline(), 60))
                lines.append(line)
                if line["type"] in ("done", "fault"):
                    break
        writer.close()
        run.signal(signal.SIGINT)
        await run.finish()
    ends = [
        (line["request_id"], line["type"]) for line in lines if line["type"] in ("done", "fault")
    ]
    assert ends == [(1, "fault"), (2, "done")], lines
    fault = next(line for line in lines if line["type"] == "fault")
    assert "context" in json.dumps(fault).lower()


async def test_no_model_and_no_network_fails_early_naming_the_key(tmp_path: Path) -> None:
    # Nothing listens on this loopback port: the hub download fails at once, as offline.
    env = {"MVP_HF_ENDPOINT": "http://127.0.0.1:9", "MVP_DOWNLOAD_RETRIES": "0",
           "MVP_MODEL_CACHE_DIR": str(tmp_path / "cache")}
    async with HeadlessRun(["--rpc-bind", "127.0.0.1:0"], tmp_path / "state", env=env) as run:
        code = await run.finish()
    assert code == 1
    (fatal,) = [f["payload"] for f in run.frames("mvp.worker.weights")]
    assert fatal["type"] == "WorkerFatal" and "gguf_local_path" in fatal["fix"]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "[model] gguf_local_path" in lines[0], run.stderr
    assert run.events("lease_deleted")

"""The run's own OpenAI endpoint for other tools (issue 21's "must show"), on a rented node
(fake Vast API, real sshd): the forwarded port answers only the run's key; the official
`openai` client streams through `mvp-tui endpoint --env` from another process; the key is in
no process's argv, log, frame or archive; the node's idle stop ends a node nobody uses, and
waits while a client keeps using it."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from mvp_tui.lease.endpoint_record import ENDPOINT_FILE
from tests.e2e.headless import HeadlessRun, event
from tests.e2e.node import Node
from tests.e2e.test_node_watchdog import KEY, destroyed_by_itself, rented_env
from tests.fakes.vastai_server import FakeVast

CHAT = {"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
OPENAI_STREAM = """
import os, sys
from openai import OpenAI
client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
stream = client.chat.completions.create(
    model=os.environ["OPENAI_MODEL"], stream=True, max_tokens=16,
    messages=[{"role": "user", "content": "hello"}],
)
chunks = [c.choices[0].delta.content or "" for c in stream if c.choices]
print(len(chunks), repr("".join(chunks)))
"""


def mvp(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    return subprocess.run(
        [sys.executable, "-m", "mvp_tui", *args], env={**clean, **env},
        capture_output=True, text=True, timeout=60, check=False,
    )


def chat(base_url: str, key: str | None) -> tuple[int, dict[str, Any]]:
    host, port = base_url.removeprefix("http://").split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    conn.request("POST", "/v1/chat/completions", json.dumps(CHAT), headers)
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    return answer.status, json.loads(body or b"{}")


def argv_of_every_process() -> bytes:
    out = b""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            out += Path(f"/proc/{pid}/cmdline").read_bytes() + b"\n"
    return out


def files_without(key: str, *roots: Path, but: tuple[str, ...]) -> list[Path]:
    """Every file under `roots` that holds `key`, but those named in `but` (its stores)."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and path.name not in but and key.encode() in path.read_bytes():
                found.append(path)
    return found


async def test_the_rented_endpoint_answers_only_the_run_key(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    with FakeVast(api_key=KEY) as fake:
        env = {**rented_env(fake, node, tmp_path, tiny_gguf),
               "MVP_DATASTREAM_FRAME_LOG": str(tmp_path / "frames.jsonl")}
        async with HeadlessRun(["--yes"], state, env=env) as run:
            ready = await run.until(event("endpoint_ready"), within=120)
            assert ready["auth"] == "key" and ready["idle_stop_mins"] == 30.0
            shown = mvp("endpoint", "--json", env=env)
            assert shown.returncode == 0, shown.stderr
            facts = json.loads(shown.stdout)
            assert facts["base_url"] == ready["base_url"] + "/v1"
            assert facts["model"] == ready["model"]
            api_key = facts["api_key"]
            assert api_key.startswith("mvp-") and len(api_key) > 40
            assert (await asyncio.to_thread(chat, ready["base_url"], None))[0] == 401
            assert (await asyncio.to_thread(chat, ready["base_url"], "mvp-wrong"))[0] == 401
            status, body = await asyncio.to_thread(chat, ready["base_url"], api_key)
            assert status == 200 and body["choices"][0]["message"]["content"]
            # The official client, in another process, set up by `eval`.
            script = tmp_path / "stream.py"
            script.write_text(OPENAI_STREAM)
            clean = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "OPENAI"))}
            line = (f'eval "$({sys.executable} -m mvp_tui endpoint --env)" && '
                    f'exec {sys.executable} {script}')
            streamed = await asyncio.to_thread(
                subprocess.run, ["bash", "-c", line], env={**clean, **env},
                capture_output=True, text=True, timeout=60, check=False,
            )
            assert streamed.returncode == 0, streamed.stderr
            count, text = streamed.stdout.split(" ", 1)
            assert int(count) >= 8 and len(text) > 4, streamed.stdout
            assert api_key.encode() not in argv_of_every_process()
            run.signal(signal.SIGTERM)
            code = await run.finish(within=60)
        assert code == 0, run.stderr
        assert fake.billing() == []
    endpoint = state / "runs" / ready["run_id"] / ENDPOINT_FILE
    assert endpoint.stat().st_mode & 0o777 == 0o600
    assert api_key not in run.stderr and api_key not in json.dumps(run.records)
    assert (tmp_path / "frames.jsonl").stat().st_size > 0
    # Only its two stores hold it: the run's endpoint record and the node's launcher (its env).
    assert files_without(api_key, state, node.node_dir, tmp_path / "frames.jsonl",
                         but=(ENDPOINT_FILE, "run.sh")) == []
    assert "OpenAI endpoint http://127.0.0.1:" in run.stderr


async def test_the_idle_stop_ends_a_rented_node_nobody_uses(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        env = {**rented_env(fake, node, tmp_path, tiny_gguf), "MVP_IDLE_STOP_MINS": "0.05"}
        async with HeadlessRun(["--yes"], tmp_path / "state", env=env) as run:
            await run.until(event("node_ready"), within=120)
            (instance,) = fake.billing()
            warning = await run.until(
                lambda r: r.get("event") == "idle_stop_notice" and r["state"] == "warning"
            )
            assert 0 < warning["stops_in_s"] <= 0.75 + 0.1
            code = await run.finish(within=60)
        assert code == 0, run.stderr  # not 3: the lease is confirmed gone
        await destroyed_by_itself(fake, instance["id"], 10)
        assert fake.billing() == [] and fake.scope_violations == []
    (fired,) = [e for e in run.events("node_watchdog") if e["status"] == "fired"]
    assert fired["trigger"] == "idle_stop"
    assert "idle stop" in run.stderr
    assert not run.events("node_replacing")


async def test_the_idle_stop_waits_while_a_client_keeps_asking(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        window_s = 6.0  # a loaded machine's answer took 2 s: the client's pace stays well inside
        env = {**rented_env(fake, node, tmp_path, tiny_gguf),
               "MVP_IDLE_STOP_MINS": str(window_s / 60)}
        async with HeadlessRun(["--yes"], tmp_path / "state", env=env) as run:
            ready = await run.until(event("endpoint_ready"), within=120)
            facts = json.loads(mvp("endpoint", "--json", env=env).stdout)
            loop = asyncio.get_running_loop()
            until = loop.time() + 3 * window_s
            while loop.time() < until:
                status, _ = await asyncio.to_thread(chat, ready["base_url"], facts["api_key"])
                assert status == 200
                await asyncio.sleep(1.0)  # a client's pace (well inside the window)
            assert len(fake.billing()) == 1
            run.signal(signal.SIGTERM)
            assert await run.finish(within=60) == 0, run.stderr
    assert not [e for e in run.events("node_watchdog") if e["status"] == "fired"]
    states = [e["state"] for e in run.events("idle_stop_notice")]
    assert states[:1] == ["armed"] and "warning" not in states


async def test_the_address_and_key_outlive_a_reattach(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    from mvp_tui.config import ConfigPaths, load_config
    from mvp_tui.engine.run import RunEngine
    from mvp_tui.events import EngineEvent
    from mvp_tui.lease.endpoint_record import load_endpoint
    from mvp_tui.lease.records import RecordStore

    state = tmp_path / "state"
    with FakeVast(api_key=KEY) as fake:
        env = rented_env(fake, node, tmp_path, tiny_gguf)
        async with HeadlessRun(["--yes", "--until", "ready"], state, env=env) as run:
            assert await run.finish(within=180) == 0, run.stderr
        (before,) = run.events("endpoint_ready")
        engine_pid = run.frames("mvp.worker.weights")[0]["payload"]["engine_pid"]
        kept = load_endpoint(RecordStore(state), before["run_id"])
        assert kept is not None and not kept.serving  # its forward ended with the command
        config = load_config(env={**env, "MVP_PROMPT_OPENAI_PORT": "0"},
                             paths=ConfigPaths(default=tmp_path / "none.toml"))
        seen: list[EngineEvent] = []
        engine = RunEngine(config, seen.append, environ={**os.environ, **env})
        try:
            (earlier,) = await engine.leasing.earlier_leases()
            engine.leasing.adopt(earlier)
            await engine.leasing.prepare_ssh_identity()
            ready = await engine.link.bring_up(timeout_s=60)
            assert ready.local_url == before["base_url"]  # the same address, port 0 or not
            status, _ = await asyncio.to_thread(chat, ready.local_url, kept.api_key)
            assert status == 200  # the agent still checks the key the first run made
            after = [e for e in seen if type(e).__name__ == "EndpointReady"]
            assert [e.base_url for e in after] == [before["base_url"]]  # type: ignore[attr-defined]
        finally:
            await engine.link.close_session(shutdown_agent=True)
            await engine.teardown.destroy_leases()
            await engine.aclose()
        assert fake.billing() == []
    with contextlib.suppress(ProcessLookupError):  # the "node" is this machine
        os.kill(engine_pid, signal.SIGTERM)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_a_local_node_serves_on_the_fixed_port_with_the_key(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    port = free_port()
    state = tmp_path / "state"
    env = {"MVP_PROMPT_OPENAI_PORT": str(port)}
    args = ["--gguf-local-path", str(tiny_gguf), "--rpc-bind", "127.0.0.1:0"]
    async with HeadlessRun(args, state, env=env) as run:
        ready = await run.until(event("endpoint_ready"), within=120)
        assert ready["base_url"] == f"http://127.0.0.1:{port}" and ready["auth"] == "key"
        facts = json.loads(mvp("endpoint", "--json", env={"MVP_STATE_DIR": str(state)}).stdout)
        assert (await asyncio.to_thread(chat, ready["base_url"], None))[0] == 401
        assert (await asyncio.to_thread(chat, ready["base_url"], "mvp-wrong"))[0] == 401
        status, body = await asyncio.to_thread(chat, ready["base_url"], facts["api_key"])
        assert status == 200 and body["choices"][0]["message"]["content"]
        assert facts["api_key"].encode() not in argv_of_every_process()
        run.signal(signal.SIGTERM)
        assert await run.finish(within=60) == 0, run.stderr
    assert facts["api_key"] not in run.stderr + json.dumps(run.records)


async def test_a_taken_port_is_said_and_another_serves(tiny_gguf: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        env = {"MVP_PROMPT_OPENAI_PORT": str(taken)}
        args = ["--gguf-local-path", str(tiny_gguf), "--prompt", "hi", "--max-tokens", "4",
                "--down-after"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            assert await run.finish(within=120) == 0, run.stderr
        # `mvp-tui endpoint` says the address moved, and who holds the usual one.
        state = {"MVP_STATE_DIR": str(tmp_path / "state"), **env}
        (ready,) = run.events("endpoint_ready")
        told = await asyncio.to_thread(mvp, "endpoint", "--json", ready["run_id"],
                                       env=state)
    assert ready["port_taken"] == taken and not ready["base_url"].endswith(f":{taken}")
    holder_words = f"pid {os.getpid()} ("  # this test holds it
    assert ready["port_owner"].startswith(holder_words), ready
    assert f"local port {taken} ([prompt] openai_port) is taken by {holder_words}" in run.stderr
    assert told.returncode == 0, told.stderr
    assert "the address moved" in told.stderr and holder_words in told.stderr
    assert ready["base_url"] in told.stderr
    assert run.events("prompt_done")  # the run's own prompt went to the other port, keyed

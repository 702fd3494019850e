"""A headless run from one of the seed's own config files, read back through its archive
with a reader built only from the seed's documented record shapes (tests/seed/
seed_archive.py): every seed bootstrap phase in the seed's order, every provisioning event
with its provider, every prompt record field (the RPC client's own request_id), the
orchestrator's own stderr lines on the node's `.stderr` channel, node frames as
`node_cluster`. The run is served over the prompt RPC (the seed's reply shapes) and ended
by `stop` on stdin: teardown confirmed, exit 0. Contract: shared/seeds/002_…txt."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.e2e.headless import rpc_token
from tests.seed.proc import clean_env, start_cli
from tests.seed.seed_archive import (
    PROVISION_KINDS,
    SEED_PHASES,
    SEED_STATUSES,
    SeedRecord,
    on,
    read_seed_archive,
)
from tests.seed.seed_files import LAYERING_TOML

PROMPT = "héllo, seed"
REQUEST_ID = 4242


async def until_frame(proc: asyncio.subprocess.Process, channel: str, phase: str) -> dict:
    assert proc.stdout is not None
    while True:
        line = await proc.stdout.readline()
        assert line, "the run ended before " + phase
        record = json.loads(line)
        payload = record.get("payload")
        if (
            record.get("channel") == channel
            and isinstance(payload, dict)
            and payload.get("phase") == phase
        ):
            return payload


async def prompt_over_rpc(addr: str, token: str) -> list[dict]:
    host, _, port = addr.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    request = {"request_id": REQUEST_ID, "prompt_text": PROMPT, "max_tokens": 8, "token": token}
    writer.write(json.dumps(request).encode() + b"\n")
    await writer.drain()
    replies = []
    while True:
        reply = json.loads(await asyncio.wait_for(reader.readline(), 60))
        replies.append(reply)
        if reply["type"] != "text_delta":
            break
    writer.close()
    await writer.wait_closed()
    return replies


async def test_a_seed_config_run_reads_back_as_the_seeds_archive(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    config = tmp_path / "layering.toml"
    config.write_text(LAYERING_TOML)
    archive = tmp_path / "frames.jsonl"
    env = clean_env(tmp_path / "state", MVP_NODE_PROVIDER="local")
    args = [
        "--config",
        str(config),
        "up",
        "--headless",
        "--gguf-local-path",
        str(tiny_gguf),
        "--rpc-bind",
        "127.0.0.1:0",
        "--datastream-frame-log",
        str(archive),
    ]
    proc = await start_cli(args, env)
    try:
        rpc = await asyncio.wait_for(until_frame(proc, "mvp.orch.bootstrap", "prompt_rpc"), 90)
        replies = await prompt_over_rpc(rpc["detail"]["addr"], rpc_token(tmp_path / "state"))
        assert proc.stdin is not None
        proc.stdin.write(b"  STOP \n")  # the seed's listener trims and ignores case
        await proc.stdin.drain()
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stderr = err.decode()
    assert proc.returncode == 0, stderr
    events = [json.loads(line) for line in out.splitlines()]
    assert any(e["event"] == "lease_deleted" for e in events), "teardown confirmed"
    assert "stopped by a stop line on stdin; torn down, confirmed" in stderr
    record = json.loads((tmp_path / "state" / "runs" / "41" / "record.json").read_text())
    assert record["run_id"] == "41"  # the seed's number names the run's record

    # The prompt RPC's replies, in the seed's field names.
    *deltas, done = replies
    assert all(set(d) == {"type", "request_id", "text"} for d in deltas)
    assert set(done) == {"type", "request_id", "final_text", "tokens_generated", "elapsed_ms"}
    assert done["type"] == "done" and {r["request_id"] for r in replies} == {REQUEST_ID}

    records = read_seed_archive(archive)
    check_bootstrap(on(records, "mvp.orch.bootstrap"))
    check_provisioning(on(records, "mvp.provisioning.events"))
    check_prompts(on(records, "mvp.orch.prompt"), done)
    check_sources(records)


def check_bootstrap(frames: list[SeedRecord]) -> None:
    phases = []
    for frame in frames:
        p = frame.payload
        assert set(p) == {"type", "phase", "status", "run_id", "node_id", "detail"}, p
        assert p["type"] == "OrchBootstrap" and p["status"] in SEED_STATUSES
        assert (p["run_id"], p["node_id"]) == (41, 9)  # the file's run_id = 41, node_id = 9
        assert frame.stream == "mvp-orchestrator#41"
        phases.append((p["phase"], p["status"]))
    names = [name for name, _ in phases]
    firsts = [names.index(phase) for phase in SEED_PHASES]  # every seed phase is there …
    assert firsts == sorted(firsts), names  # … in the seed's order
    assert ("shutdown", "started") in phases and ("orch_exit", "ready") in phases
    for added in ("offers", "node_provisioner", "node_spec", "prompt_loop"):
        assert added in names
    assert not any(status == "failed" for _, status in phases), phases
    config = next(f.payload["detail"] for f in frames if f.payload["phase"] == "config")
    assert {
        "config_profile",
        "image",
        "provider",
        "rpc_bind",
        "model_id",
        "stage_index",
        "layer_end_exclusive",
        "relay_mode",
        "provider_config",
    } <= set(config)
    assert (config["config_profile"], config["provider"]) == ("deploy", "local")
    assert (config["stage_index"], config["layer_end_exclusive"]) == (3, 24)
    shutdown = next(f.payload["detail"] for f in frames if f.payload["phase"] == "shutdown")
    assert shutdown == {"source": "stdin"}


def check_provisioning(frames: list[SeedRecord]) -> None:
    kinds = []
    for frame in frames:
        event = frame.payload["event"]
        assert set(event) == {"run_id", "node_id", "kind", "provider", "message"}
        assert event["kind"] in PROVISION_KINDS and event["provider"] == "local", event
        kinds.append(event["kind"])
    assert kinds[0] == "ProvisionStart" and "NodeLive" in kinds and kinds[-1] == "NodeStopped"
    start = frames[0].payload["event"]["message"]
    assert start.startswith("starting local image "), start


def check_prompts(frames: list[SeedRecord], done: dict) -> None:
    steps = []
    for frame in frames:
        p = frame.payload
        assert set(p) == {"type", "phase", "status", "run_id", "node_id", "request_id", "detail"}
        assert p["type"] == "OrchPromptEvent" and p["request_id"] == REQUEST_ID
        steps.append((p["phase"], p["status"]))
    work = next(f.payload["detail"] for f in frames if f.payload["phase"] == "prompt_work")
    assert work["prompt_bytes"] == len(PROMPT.encode()) and work["max_tokens"] == 8
    assert steps[:3] == [
        ("prompt_work", "observed"),
        ("node_prompt_send", "started"),
        ("node_prompt_send", "ready"),
    ]
    assert steps[-1] == ("prompt_complete", "ready")
    observed = [f.payload["detail"] for f in frames if f.payload["phase"] == "node_prompt_event"]
    assert observed[-1]["event"] == "Done" and observed[-1]["terminal"] is True
    assert observed[-1]["tokens_generated"] == done["tokens_generated"]
    assert all(d["event"] == "TextDelta" and "text_bytes" in d for d in observed[:-1])


def check_sources(records: list[SeedRecord]) -> None:
    by_channel = {}
    for record in records:
        by_channel.setdefault(record.channel, set()).add(record.source)
    assert by_channel["mvp.orch.bootstrap"] == {"orchestrator"}
    assert by_channel["mvp.worker.weights"] == {"node_cluster"}  # the node, once it joined
    provider = [r.payload["line"] for r in on(records, "mvp.provisioning.logs.node.9.provider")]
    assert all(set(line) == {"run_id", "node_id", "stream", "line"} for line in provider)
    assert {line["stream"] for line in provider} == {"Provider"}
    # The orchestrator's own stderr lines (the seed's OrchStdioCapture) on the node's
    # `.stderr` channel, as the seed's own test reads them (`…node.9.stderr`), warnings first.
    stderr = [
        r.payload["line"]
        for r in on(records, "mvp.provisioning.logs.node.9.stderr")
        if r.source == "orchestrator"
    ]
    assert {line["stream"] for line in stderr} == {"Stderr"}
    texts = [line["line"] for line in stderr]
    assert texts[0].startswith("warning: "), texts
    assert any(t.startswith("warning: [prompt] dashboard = true") for t in texts), texts
    assert "stopped by a stop line on stdin; torn down, confirmed" in texts
    assert not any(line["line"].startswith("warning: ") for line in provider)

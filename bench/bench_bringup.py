"""A whole rented bring-up, Enter → ready, against the floor the physical work allows.

`mvp-tui up --headless --yes --until ready` rents from the fake Vast server; scripted delays
stand for the physical work:
- the instance runs B s after the create, and its recorded `onstart` (boot guard, model
  prefetch) starts then, as a container's would (tests/fakes/container.py);
- a real OpenSSH sshd on loopback answers S s after that (tests/ssh/sshd.py);
- a loopback hub serves the model at R bytes/s (tests/agent/hub_server.py; its HEAD gives the
  size and sha256 the agent checks);
- the engine (llama.cpp's server from llama-cpp-python, on the tiny GGUF) loads: its own load
  time, as the node reports it, is the `load` term.

Prints Enter → ready against the floor `B + max(S, size/R) + load` and the serial sum
`B + S + size/R + load`. Target: ≤ 1.15x the floor + 1.5 s, and the model's download began
before sshd answered. The scripted delays are the only sleeps: they *are* the physical work.

Run: .venv/bin/python bench/bench_bringup.py [--boot 3] [--sshd 4] [--download 6]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncssh

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mvp_tui.rehearsal.tiny_gguf import write_tiny_gguf  # noqa: E402
from tests.agent.hub_server import HubServer  # noqa: E402
from tests.e2e.headless import HeadlessRun, Record, event  # noqa: E402
from tests.e2e.node import container_env, processes_under  # noqa: E402
from tests.fakes.container import Container  # noqa: E402
from tests.fakes.vastai_server import FakeVast  # noqa: E402
from tests.ssh.sshd import Sshd, sshd_executable, write_key  # noqa: E402

KEY = "fake-vast-key-0123456789"
HF_REPO, HF_FILE = "mvp-bench/tiny-model", "tiny.gguf"
TARGET_RATIO, TARGET_SLACK_S = 1.15, 1.5


def created(record: Record) -> bool:
    return record.get("event") == "attempt_answered" and record.get("outcome") == "created"


async def wait_until_wall(at: float) -> None:
    """A scripted delay (the physical work), up to a wall-clock instant."""
    await asyncio.sleep(max(0.0, at - time.time()))


def run_env(fake: FakeVast, hub: HubServer, work: Path, client: Path) -> dict[str, str]:
    return {
        "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "VAST_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(client), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_NODE_PYTHON": sys.executable, "MVP_NODE_DIR": str(work / "node"),
        "MVP_GGUF_REPO": HF_REPO, "MVP_GGUF_FILE": HF_FILE, "MVP_HF_ENDPOINT": hub.url,
        "MVP_MODEL_CACHE_DIR": str(work / "cache"), "MVP_BOOT_GUARD_DIR": str(work / "guard"),
        "MVP_MODEL_ID": "tiny", "MVP_MAX_CONTEXT": "256",
        # The loopback sshd keeps its own host key (the pinned key's install is timed apart,
        # tests/vastai/test_pinned_host_key.py): first use is trusted here.
        "MVP_VASTAI_PIN_HOST_KEY": "false",
        **container_env(fake, work),
    }


async def bring_up(boot_s: float, sshd_s: float, download_s: float, work: Path) -> dict[str, Any]:
    data = write_tiny_gguf(work / "tiny.gguf").read_bytes()
    rate = len(data) / download_s
    client = write_key(work / "id_ed25519", asyncssh.generate_private_key("ssh-ed25519"))
    sshd = Sshd(sshd_executable(), work / "sshd")
    sshd.authorize(asyncssh.read_private_key(str(client)).export_public_key().decode())
    node: Container | None = None
    try:
        with HubServer() as hub, FakeVast(api_key=KEY) as fake:
            hub.add_file(HF_REPO, "main", HF_FILE, data)
            hub.state.rate_bps = rate
            fake.add_offer(dph_total=0.40)
            fake.running_after_s = boot_s
            fake.ssh_endpoint = ("127.0.0.1", sshd.port, True)
            env = run_env(fake, hub, work, client)
            args = ["--yes", "--until", "ready"]
            async with HeadlessRun(args, work / "state", env=env) as run:
                enter = await run.until(event("attempt_started"), within=60)
                answer = await run.until(created, within=60)
                instance = int(answer["provider_id"])
                await wait_until_wall(float(answer["at"]) + boot_s)  # the image pull
                script = fake.onstart_of(instance) or ""
                node = Container(fake.container_env(instance), work / "guard", script=script)
                node.start()
                booted_at = time.time()
                await wait_until_wall(booted_at + sshd_s)  # sshd's own start
                await sshd.start()
                sshd_at, sshd_mono = time.time(), time.monotonic()
                ready = await run.until(event("node_ready"), within=180)
                code = await run.finish(within=60)
            weights = run.frames("mvp.worker.weights")[0]["payload"]
            model = next(
                f["payload"] for f in run.frames("mvp.node.1.agent")
                if f["payload"].get("phase") == "model" and f["payload"].get("status") == "ready"
            )
            first_body = hub.state.first_body_at
        return {
            "code": code, "size": len(data), "rate": rate,
            "enter_to_ready": float(ready["at"]) - float(enter["at"]),
            "load_s": float(weights.get("load_ms") or 0) / 1000,
            "download_before_sshd": first_body is not None and first_body < sshd_mono,
            "download_lead_s": sshd_mono - first_body if first_body is not None else None,
            "ssh_after_sshd_s": _connected_at(run) - sshd_at,
            "model": model.get("detail", {}),
        }
    finally:
        if node is not None:
            node.stop()
        await sshd.stop()
        for pid in processes_under(work / "node"):  # the agent and engine --until ready left
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _connected_at(run: HeadlessRun) -> float:
    attempts = [r for r in run.events("ssh_attempt") if r.get("outcome") == "connected"]
    return float(attempts[0]["at"]) if attempts else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boot", type=float, default=3.0, help="B: create → instance runs")
    parser.add_argument("--sshd", type=float, default=4.0, help="S: instance runs → sshd")
    parser.add_argument("--download", type=float, default=6.0, help="size/R, seconds")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-bringup-"))
    try:
        got = asyncio.run(bring_up(args.boot, args.sshd, args.download, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    b, s, d, load = args.boot, args.sshd, got["size"] / got["rate"], got["load_s"]
    floor, serial = b + max(s, d) + load, b + s + d + load
    took = got["enter_to_ready"]
    target = TARGET_RATIO * floor + TARGET_SLACK_S
    model = got["model"]
    print(f"model {got['size']:,} B at {got['rate']:,.0f} B/s (size/R {d:.1f} s); "
          f"B {b:g} s, S {s:g} s, engine load {load:.2f} s")
    print(f"Enter → ready  {took:6.2f} s")
    print(f"floor          {floor:6.2f} s  B + max(S, size/R) + load   ratio {took / floor:.2f}x")
    print(f"serial sum     {serial:6.2f} s  B + S + size/R + load       ratio {took / serial:.2f}x")
    print(f"target         {target:6.2f} s  ({TARGET_RATIO:g}x floor + {TARGET_SLACK_S:g} s)")
    lead, login = got["download_lead_s"], got["ssh_after_sshd_s"]
    print(f"download began {lead:.2f} s before sshd answered; login {login:.2f} s "
          f"after it; adopted {model.get('prefetch', {}).get('bytes', 0):,} B from the boot fetch, "
          f"verified={model.get('verified')}")
    ok = got["code"] == 0 and took <= target and got["download_before_sshd"]
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

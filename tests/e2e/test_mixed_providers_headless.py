"""Picks that mix providers walk in order headless too: a Vast offer whose instance dies at
start gives nothing (destroyed, confirmed), then the session hands over to this machine's
local node, which serves the prompt; one run, exit 0, nothing billing."""

from __future__ import annotations

import sys
from pathlib import Path

import asyncssh

from tests.e2e.headless import HeadlessRun
from tests.fakes.vastai_server import FakeVast
from tests.ssh.sshd import write_key

KEY = "fake-vast-key-0123456789"


async def test_a_vast_pick_that_fails_hands_over_to_the_local_pick(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    key = write_key(tmp_path / "id_ed25519", asyncssh.generate_private_key("ssh-ed25519"))
    with FakeVast(api_key=KEY) as fake:
        dying = fake.add_offer(dph_total=0.10)
        fake.die_on_start(dying)
        env = {"MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "VAST_URL": fake.url,
               "MVP_VASTAI_POLL_INTERVAL_SECS": "1", "MVP_NODE_PYTHON": sys.executable,
               "MVP_VASTAI_SSH_IDENTITY": str(key)}
        args = ["--yes", "--offer", str(dying), "--offer", "local:local", "--prompt", "hello",
                "--gguf-local-path", str(tiny_gguf), "--max-tokens", "4", "--down-after"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            code = await run.finish(within=180)
        assert code == 0, run.stderr
        assert fake.billing() == []
        assert fake.destroyed(), "the dead instance is destroyed, confirmed"
    assert "no lease on vastai" in run.stderr and "trying local" in run.stderr
    started = [e["provider"] for e in run.events("run_started")]
    assert started == ["vastai", "local"], started
    (done,) = run.events("prompt_done")
    assert done["tokens_generated"] >= 1
    # One hub for the session: its channels' positions run on across the providers walked,
    # and each frame is printed once (the printer was attached once, to the session's hub).
    printed = [(r["channel"], r["position"]) for r in run.records if r.get("event") == "frame"]
    assert len(printed) == len(set(printed)), "a frame printed twice, or a hub begun anew"
    assert run.frames("mvp.worker.weights"), "the local node's frames reach the printer"

"""`NodeSession.send_control`: control lines for the node agent's dead-man's switch, written
to its control fifo through the session's connection to a real sshd, read by the real agent
(with a fake `llama-server` on PATH)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.agent_bundle import agent_zip
from mvp_tui.ssh import SessionStopped
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.ssh.conftest import SshHarness
from tests.ssh.sshd import Sshd

AGENT = agent_zip()  # the zipapp, as every node gets it
FAKE_LLAMA = Path(__file__).parents[1] / "agent" / "fake_llama_server.py"


def agent_env(tmp_path: Path) -> dict[str, str]:
    """The real agent on the "node" (this machine): tiny model, fake engine first on PATH,
    a local switch with a silence limit far away."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "llama-server"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_LLAMA}" "$@"\n')
    script.chmod(0o755)
    return {
        "MVP_NODE_PYTHON": sys.executable,
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "MVP_RUN_ID": "r-0000abcd",
        "MVP_LOGICAL_NODE_ID": "1",
        "MVP_MODEL_ID": "tiny",
        "MVP_GGUF_LOCAL_PATH": str(write_tiny_gguf(tmp_path / "tiny.gguf", seed=0)),
        "MVP_MODEL_CACHE_DIR": str(tmp_path / "cache"),
        "FAKE_LOADING_PROBES": "0",
        "MVP_WATCHDOG_PROVIDER": "local",
        "MVP_IDLE_TEARDOWN_MINS": "10",
    }


def has(harness: SshHarness, kind: str, phase: str, **fields: Any) -> bool:
    return any(
        r.get("type") == kind
        and r.get("phase") == phase
        and all(r.get(k) == v for k, v in fields.items())
        for r in harness.agent_records()
    )


async def test_control_lines_reach_the_running_agent(
    sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    session = harness.session()
    assert await session.send_control("heartbeat") is False, "not started: no connection"
    try:
        await session.start_agent(AGENT, agent_env(tmp_path), str(harness.remote_dir))
        await harness.wait_for(lambda: has(harness, "NodeAgentPhase", "watch", status="started"))
        session.ready.set()
        verdict = next(r for r in harness.agent_records() if r.get("phase") == "watchdog")
        assert (verdict["status"], verdict["detail"]["idle_armed"]) == ("ready", True)

        assert await session.send_control("heartbeat") is True
        assert await session.send_control("detach") is True
        await harness.wait_for(
            lambda: has(harness, "NodeAgentProgress", "watchdog", state="detached")
        )
        detached = next(r for r in harness.agent_records() if r.get("state") == "detached")
        assert detached["idle_armed"] is False and detached["source"] == "stdin"
        assert await session.send_control("attach\n") is True
        await harness.wait_for(
            lambda: has(harness, "NodeAgentProgress", "watchdog", state="attached")
        )
        with pytest.raises(ValueError, match="heartbeat"):
            await session.send_control("heartbeat; rm -rf /")
        # Heartbeats are known words: the agent noticed nothing odd.
        assert not any(r.get("type") == "NodeAgentNotice" for r in harness.agent_records())

        assert await session.send_control("shutdown") is True
        await harness.wait_for(lambda: has(harness, "NodeAgentPhase", "agent_exit"))
        exit_record = next(r for r in harness.agent_records() if r.get("phase") == "agent_exit")
        assert exit_record["detail"] == {"exit_code": 0, "source": "stdin"}
        await harness.wait_for(lambda: bool(harness.of(SessionStopped)))
        assert await session.send_control("heartbeat") is False, "no agent, no connection"
    finally:
        await session.close()
    assert await session.send_control("heartbeat") is False, "closed session"

"""`[vastai] bootstrap_command` runs on the node after the agent's set-up (its files in the
run directory, the agent started), with the agent's environment, once; a failing command
fails the bring-up and the lease is torn down. Against a real OpenSSH sshd as the rented node
and the fake Vast API. Contract: shared/seeds/002_…txt (`bootstrap_command`),
docs/seed-compatibility.md."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e.headless import HeadlessRun
from tests.e2e.node import Node, container_env
from tests.fakes.vastai_server import FakeVast

KEY = "fake-vast-key-0123456789"
# Proves the order: the agent's files, env and pid are in place when the command runs.
COMMAND = (
    "test -s agent.pid && test -f agent.pyz && test -f run.sh && "
    'echo "boot $MVP_RUN_ID node $MVP_LOGICAL_NODE_ID" > bootstrap.out && echo hello-from-boot'
)


def vast_env(fake: FakeVast, node: Node, tmp_path: Path, command: str) -> dict[str, str]:
    fake.add_offer(dph_total=0.40)
    fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
    return {
        "MVP_NODE_PROVIDER": "vastai",
        "VASTAI_API_KEY": KEY,
        "VAST_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(node.client_key),
        "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_NODE_PYTHON": sys.executable,
        "MVP_NODE_DIR": str(node.node_dir),
        "MVP_SSH_RETRY_INITIAL_SECS": "0.2",
        "MVP_VASTAI_BOOTSTRAP_COMMAND": command,
        **container_env(fake, tmp_path),
    }


def provider_lines(run: HeadlessRun) -> list[str]:
    return [
        f["payload"]["line"]["line"]
        for f in run.frames("mvp.provisioning.logs.node.1.provider")
        if isinstance(f["payload"], dict) and "line" in f["payload"]
    ]


async def test_bootstrap_command_runs_after_the_agent_is_set_up(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        env = vast_env(fake, node, tmp_path, COMMAND)
        args = ["--yes", "--gguf-local-path", str(tiny_gguf), "--until", "ready", "--down-after"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            code = await run.finish(within=180)
        assert code == 0, run.stderr
        assert fake.billing() == []
    run_id = run.events("run_started")[0]["run_id"]
    out = node.node_dir / run_id / "bootstrap.out"
    assert out.read_text() == f"boot {run_id} node 1\n"
    lines = provider_lines(run)
    assert "bootstrap command stdout: hello-from-boot" in lines
    assert "[vastai] bootstrap_command finished (status 0)" in lines
    assert run.events("node_ready")


async def test_a_failing_bootstrap_command_fails_the_run_and_tears_down(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        env = vast_env(fake, node, tmp_path, "echo broken >&2; exit 7")
        args = ["--yes", "--gguf-local-path", str(tiny_gguf), "--down-after"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            code = await run.finish(within=120)
        assert code == 1, run.stderr
        assert fake.billing() == []
    (failed,) = run.events("node_failed")
    assert failed["reason"] == "[vastai] bootstrap_command exited with status 7"
    assert "bootstrap command stderr: broken" in provider_lines(run)
    assert run.events("lease_deleted")

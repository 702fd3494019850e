"""A failure that every host would repeat stops the run after the first attempt, with the fix
named: an image without python3, a corrupt GGUF, our own SSH client failing a live sshd. The
second offer is never created."""

from __future__ import annotations

from pathlib import Path

import asyncssh

from tests.e2e.headless import HeadlessRun
from tests.e2e.node import Node, vast_node_env
from tests.fakes.vastai_server import FakeVast
from tests.ssh.test_refusals import banner_then_bad_kexinit, fake_node, image_without_python

KEY = "fake-vast-key-0123456789"


def _creates(fake: FakeVast) -> int:
    return sum(1 for r in fake.requests if r.method == "PUT" and "/asks/" in r.path)


async def _run_two_offers(
    fake: FakeVast, node: Node, tmp_path: Path, model: Path, **env_over: str | None
) -> HeadlessRun:
    for price in (0.10, 0.20):
        fake.add_offer(dph_total=price)
    fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
    env = vast_node_env(fake, node, KEY, tmp_path)
    for name, value in env_over.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    args = ["--yes", "--until", "ready", "--gguf-local-path", str(model)]
    async with HeadlessRun(args, tmp_path / "state", env=env) as run:
        code = await run.finish(within=180)
    assert code == 1, run.stderr
    return run


async def test_an_image_without_python3_stops_after_one_host(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    await node.sshd.stop()
    node.sshd.options = ["-o", f"SetEnv={image_without_python(tmp_path)}"]
    await node.sshd.start()
    with FakeVast(api_key=KEY) as fake:
        # The node's own python3, as the image would name it: not on its PATH.
        run = await _run_two_offers(fake, node, tmp_path, tiny_gguf, MVP_NODE_PYTHON=None)
        assert _creates(fake) == 1, "a run-wide failure tries no second host"
        assert fake.billing() == []
    (abandoned,) = run.events("attempt_abandoned")
    assert (abandoned["scope"], abandoned["failure_kind"]) == ("run", "image_unfit")
    assert "python3" in run.stderr and "[image] node" in run.stderr


async def test_a_corrupt_gguf_stops_after_one_host(node: Node, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 4096)  # the magic, then garbage
    with FakeVast(api_key=KEY) as fake:
        run = await _run_two_offers(fake, node, tmp_path, corrupt)
        assert _creates(fake) == 1, "a run-wide failure tries no second host"
        assert fake.billing() == []
    (abandoned,) = run.events("attempt_abandoned")
    assert abandoned["scope"] == "run", abandoned
    assert abandoned["stage"] == "engine"
    assert "GGUF file is corrupt" in run.stderr, run.stderr


async def test_our_ssh_client_failing_a_live_sshd_stops_after_one_host(tmp_path: Path) -> None:
    """Seed 003's LOCAL_STRIKES: sshd answers, our client fails its handshake twice; no other
    host would do better, so the second offer is never rented."""
    key = tmp_path / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    key.chmod(0o600)
    async with fake_node(banner_then_bad_kexinit) as port:
        with FakeVast(api_key=KEY) as fake:
            for price in (0.10, 0.20):
                fake.add_offer(dph_total=price)
            fake.ssh_endpoint = ("127.0.0.1", port, True)
            env = {
                "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "VAST_URL": fake.url,
                "MVP_VASTAI_SSH_IDENTITY": str(key), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
                "MVP_SSH_RETRY_INITIAL_SECS": "0.2",
            }
            async with HeadlessRun(["--yes", "--until", "ready"], tmp_path / "state",
                                   env=env) as run:
                code = await run.finish(within=120)
            assert code == 1, run.stderr
            assert _creates(fake) == 1, "a local SSH problem tries no second host"
            assert fake.billing() == []
    (abandoned,) = run.events("attempt_abandoned")
    assert (abandoned["scope"], abandoned["failure_kind"]) == ("run", "local_ssh_client")
    assert "no other node would do better" in run.stderr

"""The run engine when the node cannot be trusted or cannot serve: the lease is torn down,
confirmed, and the reason names what went wrong."""

from __future__ import annotations

import sys
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.controller import RunController
from mvp_tui.engine.run import RunEngine, RunFailed
from mvp_tui.events import RecordingSink
from mvp_tui.lease.records import RecordStore
from mvp_tui.ssh.events import HostKeyPinned
from tests.e2e.node import Node, container_env
from tests.fakes.vastai_server import FakeVast

KEY = "fake-vast-key-0123456789"


def _engine(
    fake: FakeVast, client: Path, tmp_path: Path, model: Path, sink: RecordingSink,
    **more: str,
) -> RunEngine:
    env = {**more,
        "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "MVP_VASTAI_API_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(client), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_NODE_PYTHON": sys.executable, "MVP_STATE_DIR": str(tmp_path / "state"),
        "MVP_NODE_DIR": str(tmp_path / "node"),
        "MVP_GGUF_LOCAL_PATH": str(model), "MVP_SSH_RETRY_INITIAL_SECS": "0.1",
        "MVP_SSH_READY_TIMEOUT_SECS": "60",
    }
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    return RunEngine(config, sink, environ=container_env(fake, tmp_path))


async def test_a_host_key_that_changed_is_refused_and_the_lease_torn_down(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    sshd, client = node.sshd, node.client_key
    sink = RecordingSink()
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", sshd.port, True)
        # Trust on first use ([vastai] pin_host_key = false): the pin comes from a connection.
        engine = _engine(fake, client, tmp_path, tiny_gguf, sink,
                         MVP_VASTAI_PIN_HOST_KEY="false")
        try:
            await engine.leasing.prepare_ssh_identity()
            result = await engine.leasing.lease(await engine.search_offers())
            assert result.ok
            lease_id = result.lease.provider_id if result.lease else ""
            # The lease was reached before with another key (a re-attach after a restart).
            other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
            RecordStore(tmp_path / "state").pin_host_key(engine.ctx.run_id, lease_id or "", other)
            with pytest.raises(RunFailed) as failed:
                await engine.link.bring_up(timeout_s=60)
            assert (await RunController(engine).stop(reason="test")).nothing_bills
        finally:
            await engine.aclose()
        assert fake.billing() == []
    message = str(failed.value)
    assert lease_id in message and sshd.fingerprint in message
    assert "SHA256:" in message.replace(sshd.fingerprint, "")  # the pinned one is named too
    assert not sink.of(HostKeyPinned)


async def test_a_model_missing_on_the_node_is_worker_fatal_and_torn_down(
    node: Node, tmp_path: Path
) -> None:
    sshd, client = node.sshd, node.client_key
    sink = RecordingSink()
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", sshd.port, True)
        engine = _engine(fake, client, tmp_path, tmp_path / "not-on-the-node.gguf", sink)
        try:
            await engine.leasing.prepare_ssh_identity()
            assert (await engine.leasing.lease(await engine.search_offers())).ok
            with pytest.raises(RunFailed, match=r"gguf_local_path"):
                await engine.link.bring_up(timeout_s=60)
            assert (await RunController(engine).stop(reason="test")).nothing_bills
        finally:
            await engine.aclose()
        assert fake.billing() == []

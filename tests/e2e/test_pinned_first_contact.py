"""Pinned first contact on Vast, end to end (fake Vast API, real sshd, headless): a node that
presents another key than the one pinned before create is "not yet" — no login, no
`run.sh` (the env) — until its start command installs the pinned key; a node that never does is
given up within its budget, destroyed, and the next host tried."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.headless import HeadlessRun, event
from tests.e2e.node import Node, vast_node_env
from tests.e2e.test_vast_headless import cli
from tests.fakes.vastai_server import FakeVast
from tests.ssh.pinned_key import pinned_key

KEY = "fake-vast-key-0123456789"


def _not_yet(record: dict[str, object]) -> bool:
    return record.get("event") == "ssh_attempt" and record.get("outcome") == "host_key_not_yet"


async def test_an_unpinned_key_is_not_yet_until_the_pinned_one_answers(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.on_container_start = None  # the start command has not installed the key yet
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
        env = vast_node_env(fake, node, KEY, tmp_path)
        own = node.sshd.fingerprint
        args = ["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            refused = await run.until(_not_yet, within=60)
            assert own in str(refused["detail"]) and "nothing is sent" in str(refused["detail"])
            # Nothing reached the node: no run.sh (the env: HF_TOKEN and the like) was sent.
            assert not list(node.node_dir.rglob("run.sh"))
            (put,) = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
            key = pinned_key(put.body["env"])
            assert key is not None
            node.sshd.adopt_host_key(key)  # the start command gets there
            pinned = await run.until(event("host_key_pinned"), within=60)
            code = await asyncio.wait_for(run.finish(within=120), 130)
        assert code == 0, run.stderr
        assert pinned["before_create"] is True and pinned["fingerprint"] == node.sshd.fingerprint
        assert pinned["fingerprint"] != own
        connected = [r for r in run.events("ssh_attempt") if r["outcome"] == "connected"]
        first_ok = run.records.index(connected[0])
        assert all(run.records.index(r) < first_ok for r in run.records if _not_yet(r))
        assert run.events("node_ready")
        down = cli("down", "--all", "--yes", env={**env, "MVP_STATE_DIR": str(tmp_path / "state")})
        assert down.returncode == 0 and fake.billing() == [], down.stderr


async def test_a_node_that_never_presents_the_pinned_key_is_given_up(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.on_container_start = None  # its launch mode never runs the key install
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
        env = {**vast_node_env(fake, node, KEY, tmp_path), "MVP_SSH_READY_TIMEOUT_SECS": "4"}
        args = ["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            code = await run.finish(within=120)
        assert code == 1, run.stderr
        assert fake.billing() == []
    (abandoned,) = run.events("attempt_abandoned")
    assert abandoned["failure_kind"] == "host_key_not_pinned", abandoned
    assert "pinned" in abandoned["reason"], abandoned
    assert not run.events("agent_started") and not list(node.node_dir.rglob("run.sh"))
    assert not [r for r in run.events("ssh_attempt") if r["outcome"] == "connected"]


async def test_the_pinned_key_is_rotated_over_the_verified_session(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    """The pinned key's private half stays readable at Vast for the instance's life: once it
    answered, the node makes a new key (ssh-keygen there), the record pins it, sshd serves it,
    a restarted instance's onstart does not put the old one back, and `down` still works."""
    import json

    import asyncssh

    from mvp_tui.providers.vastai.host_key import ROTATED_MARK, install_script

    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", node.sshd.port, True)
        env = vast_node_env(fake, node, KEY, tmp_path)
        args = ["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            code = await asyncio.wait_for(run.finish(within=120), 130)
        assert code == 0, run.stderr
        first, rotated = run.events("host_key_pinned")
        assert first["before_create"] is True
        assert rotated["rotated_from"] == first["fingerprint"] != rotated["fingerprint"]
        served = node.sshd.served_key()
        assert served.get_fingerprint() == rotated["fingerprint"]
        seen = await asyncssh.get_server_host_key("127.0.0.1", node.sshd.port)
        assert seen is not None and seen.get_fingerprint() == rotated["fingerprint"]
        (record,) = (tmp_path / "state" / "runs").glob("*/record.json")
        (lease,) = json.loads(record.read_text())["leases"]
        assert lease["host_key"].split()[:2] == served.export_public_key().decode().split()[:2]
        assert lease["host_key_pending"] is None
        assert (node.sshd.dir / f"ssh_host_ed25519_key{ROTATED_MARK}").exists()
        # The instance restarts: its onstart runs again with the create's env (the pieces).
        (put,) = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
        import os

        again = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", install_script(), stderr=asyncio.subprocess.PIPE,
            env={"PATH": os.environ["PATH"], **node.sshd.rotation_env(), **put.body["env"]},
        )
        _, err = await asyncio.wait_for(again.communicate(), 30)
        assert again.returncode == 0, err
        assert node.sshd.served_key().get_fingerprint() == rotated["fingerprint"]
        down = cli("down", "--all", "--yes", env={**env, "MVP_STATE_DIR": str(tmp_path / "state")})
        assert down.returncode == 0 and fake.billing() == [], down.stderr

"""The boot guard from create (issue 19 item 5), headless against the fake Vast server: the
instance's container runs the `onstart` the run's create sent (tests/fakes/container.py).

- A run `kill -9`ed before SSH ever answers: the instance destroys itself, with its own key,
  within the grace plus a minute of the kill.
- A node whose agent attached (a real sshd node, the real agent) is never destroyed by its
  guard, past the grace; its verdict reaches the engine and the Bootstrap pane.
- A guard that cannot run stops the run when `require_node_watchdog` holds (the default)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.widgets.bootstrap_model import BootstrapModel, Stage, Status
from tests.e2e.headless import HeadlessRun, Record, event
from tests.e2e.node import Node
from tests.e2e.test_node_watchdog import KEY, creates, destroyed_by_itself, rented_env
from tests.e2e.test_vast_headless import cli
from tests.fakes.container import Container, wait_until
from tests.fakes.vastai_server import FakeVast


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that takes TCP connections and never says a word (no SSH banner)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


def created(record: Record) -> bool:
    return record.get("event") == "attempt_answered" and record.get("outcome") == "created"


def start_container(fake: FakeVast, instance: int, guard_dir: Path, **env: str) -> Container:
    script = fake.onstart_of(instance)
    assert script is not None and "mvp_boot_guard" in script
    full = {k: v for k, v in {**fake.container_env(instance), **env}.items() if v}
    node = Container(full, guard_dir, script=script)
    node.start()
    return node


async def test_a_run_killed_before_ssh_answers_leaves_an_instance_that_destroys_itself(
    silent_port: int, tmp_path: Path
) -> None:
    grace_s = 12
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", silent_port, True)
        key = tmp_path / "id_ed25519"
        asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
        key.chmod(0o600)
        env = {
            "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "VAST_URL": fake.url,
            "MVP_VASTAI_SSH_IDENTITY": str(key), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
            "MVP_BOOT_GRACE_MINS": str(grace_s / 60), "MVP_BOOT_GUARD_DIR": str(tmp_path / "guard"),
            "MVP_SSH_RETRY_INITIAL_SECS": "0.2",
        }
        async with HeadlessRun(["--yes"], tmp_path / "state", env=env) as run:
            instance = int((await run.until(created, within=60))["provider_id"])
            # The create carried what the guard needs; nothing secret.
            sent = fake.container_env(instance)
            assert sent["MVP_BOOT_GRACE_S"] == str(grace_s)
            assert sent["MVP_VASTAI_API_URL"] == fake.url and KEY not in json.dumps(sent)
            node = start_container(fake, instance, tmp_path / "guard")
            try:
                assert node.verdict() == f"armed python3 {grace_s}"
                # Leased: the run now waits on an SSH endpoint that never answers.
                await run.until(event("lease_running"), within=60)
                assert fake.destroyed() == [], "the guard fired before the run was killed"
                run.signal(signal.SIGKILL)
                killed = time.monotonic()
                await run.finish()
                await destroyed_by_itself(fake, instance, grace_s + 60)
                took = time.monotonic() - killed
                await asyncio.to_thread(node.wait_log, "gone", 30)
            finally:
                node.stop()
        assert not run.events("lease_deleted"), "the killed run destroyed nothing itself"
        assert fake.billing() == [] and fake.scope_violations == []
        assert took <= grace_s + 60
        print(f"self-destroyed {took:.1f} s after kill -9 (grace {grace_s} s)")


async def test_an_attached_agent_stands_the_guard_down_and_its_verdict_is_a_row(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    grace_s = 15  # the agent attaches within a few seconds, even on a loaded machine
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()  # the agent then waits for the guard's verdict rather than see none
    with FakeVast(api_key=KEY) as fake:
        env = {**rented_env(fake, node, tmp_path, tiny_gguf),
               "MVP_BOOT_GRACE_MINS": str(grace_s / 60), "MVP_BOOT_GUARD_DIR": str(guard_dir)}
        container: Container | None = None
        try:
            async with HeadlessRun(["--yes", "--until", "ready"], tmp_path / "state",
                                   env=env) as run:
                instance = int((await run.until(created, within=60))["provider_id"])
                container = start_container(fake, instance, guard_dir)
                assert await run.finish(within=120) == 0, run.stderr
            (verdict,) = run.events("node_boot_guard")
            assert verdict["status"] == "armed" and verdict["grace_s"] == grace_s
            assert verdict["tool"] == "python3"
            # The guard saw the agent's marker and ended: it can never fire now.
            await asyncio.to_thread(container.wait_log, "stood down", 30)
            await asyncio.to_thread(container.wait_ended, 10)
            # Past the grace the instance is still there (a bounded look at a condition).
            started = container.started_at or 0.0
            await asyncio.to_thread(
                wait_until,
                lambda: time.monotonic() - started > grace_s + 2 or fake.destroyed() != [],
                grace_s + 30, "the grace passing",
            )
            assert [i["id"] for i in fake.billing()] == [instance]
            assert "destroying" not in container.log()
            row = guard_row(run)
            armed = f"armed (python3, {grace_s / 60:g} min)"
            assert row.status is Status.DONE and row.detail.startswith(armed)
            down = await asyncio.to_thread(cli, "down", "--all", "--yes", env=env)
            assert down.returncode == 0, down.stderr
            assert fake.destroyed_by(instance) == "account"
        finally:
            if container is not None:
                container.stop()


def guard_row(run: HeadlessRun) -> Stage:
    """The Bootstrap pane's boot guard row, from the frames the run printed."""
    model = BootstrapModel()
    for frame in run.events("frame"):
        model.record(frame["channel"], json.dumps(frame["payload"]).encode(), frame.get("at", 0))
    assert model.guard is not None, "no boot guard row"
    assert model.guard in model.rows()
    return model.guard


async def test_a_guard_that_cannot_run_stops_the_run(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    with FakeVast(api_key=KEY) as fake:
        env = {**rented_env(fake, node, tmp_path, tiny_gguf), "MVP_BOOT_GUARD_DIR": str(guard_dir)}
        fake.add_offer(dph_total=0.50)  # a second host, which would fail the same way
        container: Container | None = None
        try:
            async with HeadlessRun(["--yes"], tmp_path / "state", env=env) as run:
                instance = int((await run.until(created, within=60))["provider_id"])
                # An image whose container has no instance key for its start command.
                container = start_container(fake, instance, guard_dir, CONTAINER_API_KEY="")
                code = await run.finish(within=120)
        finally:
            if container is not None:
                container.stop()
        assert code == 1, run.stderr
        (verdict,) = run.events("node_boot_guard")
        assert verdict["status"] == "failed" and "CONTAINER_API_KEY" in verdict["reason"]
        (failed,) = run.events("node_failed")
        assert failed["reason"].startswith("the node's boot guard cannot protect this lease")
        assert "require_node_watchdog" in run.stderr
        assert not run.events("node_ready")
        # The seed refuses the run: one host rented, destroyed, and no second one.
        (abandoned,) = run.events("attempt_abandoned")
        assert (abandoned["scope"], abandoned["failure_kind"]) == ("run", "guard_failed")
        assert fake.billing() == [] and fake.destroyed_by(instance) == "account"
        assert creates(fake) == 1, "a refused guard rents no second host"

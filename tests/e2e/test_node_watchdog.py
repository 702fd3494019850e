"""The node bounds its own bill (issue 9's "must show"), on a real sshd node rented from the
fake Vast server: the agent destroys its own instance with the instance's key (never the
account's) at the deadline or after silence; a switch that cannot act stops the run; an
attached dashboard keeps its lease."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from textual.widgets import Button

from mvp_tui.engine.events import NodeReady, NodeWatchdog, OffersListed
from mvp_tui.lease import events as lease
from tests.e2e.headless import HeadlessRun, event
from tests.e2e.node import Node, container_env
from tests.e2e.test_vast_headless import cli
from tests.fakes.vastai_server import FakeVast
from tests.tui.test_dashboard_run import dashboard, is_

KEY = "fake-vast-key-0123456789"


def rented_env(fake: FakeVast, node: Node, tmp_path: Path, model: Path) -> dict[str, str]:
    fake.add_offer(dph_total=0.40)
    fake.ssh_endpoint = ("127.0.0.1", node.port, True)
    return {
        "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "MVP_VASTAI_API_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(node.client_key), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_NODE_PYTHON": sys.executable, "MVP_NODE_DIR": str(node.node_dir),
        "MVP_GGUF_LOCAL_PATH": str(model), "MVP_SSH_RETRY_INITIAL_SECS": "0.2",
        "MVP_STATE_DIR": str(tmp_path / "state"), "MVP_PROMPT_RPC_BIND": "127.0.0.1:0",
        **container_env(fake, tmp_path),
    }


async def destroyed_by_itself(fake: FakeVast, instance_id: int, within: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while fake.destroyed_by(instance_id) is None:
        assert loop.time() < deadline, f"instance {instance_id} still alive after {within:g} s"
        await asyncio.sleep(0.2)
    assert fake.destroyed_by(instance_id) == "instance"


def creates(fake: FakeVast) -> int:
    """How many create requests reached the fake (one per host rented)."""
    return sum(1 for r in fake.requests if r.method == "PUT" and "/asks/" in r.path)


def no_account_key_on_the_node(node: Node) -> None:
    for path in node.node_dir.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


async def test_until_ready_then_the_node_destroys_itself_at_its_deadline(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        # An 18 s deadline: past the bring-up (5-7 s on a loaded machine), not a minute off.
        env = {**rented_env(fake, node, tmp_path, tiny_gguf), "MVP_MAX_HOURS": "0.005"}
        args = ["--yes", "--until", "ready"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            assert await run.finish(within=120) == 0, run.stderr
        (verdict,) = [e for e in run.events("node_watchdog") if e["status"] == "ready"]
        assert verdict["armed"] and verdict["deadline_at"] is not None
        (instance,) = fake.billing()
        await destroyed_by_itself(fake, instance["id"], 18 + 60)
        assert fake.billing() == [] and fake.scope_violations == []
        no_account_key_on_the_node(node)
        down = await asyncio.to_thread(cli, "down", "--all", "--yes", env=env)
        assert down.returncode == 0, down.stderr
        assert cli("ls", "--json", env=env).stdout.strip() == ""


async def test_a_killed_attached_run_falls_silent_and_the_node_destroys_itself(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        # A 6 s silence window (the attached-dashboard test below holds a lease across three).
        env = {**rented_env(fake, node, tmp_path, tiny_gguf), "MVP_IDLE_TEARDOWN_MINS": "0.1"}
        async with HeadlessRun(["--yes"], tmp_path / "state", env=env) as run:
            await run.until(event("node_ready"), within=120)
            (instance,) = fake.billing()
            run.signal(signal.SIGKILL)
            await run.finish()
        await destroyed_by_itself(fake, instance["id"], 6 + 60)
        assert fake.scope_violations == []


async def test_a_node_that_cannot_destroy_itself_is_not_run(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        env = rented_env(fake, node, tmp_path, tiny_gguf)
        fake.add_offer(dph_total=0.50)  # a second host, which would fail the same way
        fake.node_env_file = None  # the image exposes no instance key
        env["MVP_NODE_PROVIDER_ENV_FILE"] = str(tmp_path / "no-such-environ")
        async with HeadlessRun(["--yes"], tmp_path / "state", env=env) as run:
            code = await run.finish(within=120)
        assert code == 1, run.stderr
        (verdict,) = run.events("node_watchdog")
        assert verdict["status"] == "failed" and "CONTAINER_API_KEY" in verdict["reason"]
        assert verdict["scope"] == "run"
        assert "CONTAINER_API_KEY" in run.stderr and "require_node_watchdog" in run.stderr
        assert not run.events("node_ready")
        # The seed refuses the run: one host rented, destroyed, and no second one.
        (abandoned,) = run.events("attempt_abandoned")
        assert (abandoned["scope"], abandoned["failure_kind"]) == ("run", "switch_failed")
        assert fake.billing() == []
        assert [fake.destroyed_by(i) for i in fake.destroyed()] == ["account"]
        assert creates(fake) == 1, "a refused switch rents no second host"


async def test_a_host_that_cannot_reach_the_api_is_walked_past(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        env = rented_env(fake, node, tmp_path, tiny_gguf)
        (cut_off,) = [int(o["id"]) for o in fake.offers()]
        fake.add_offer(dph_total=0.50)
        fake.cut_off_from_api(cut_off)  # that host has no way out to the API
        env["MVP_SSH_DEBUG"] = "1"  # and the seed's `ssh -v`, into the run's directory
        env["MVP_WATCHDOG_RETRY_INITIAL_S"] = "0.05"  # its four tries in 0.35 s, not 7 s
        async with HeadlessRun(["--yes", "--until", "ready"], tmp_path / "state",
                               env=env) as run:
            assert await run.finish(within=180) == 0, run.stderr
        (debug_log,) = (tmp_path / "state").rglob("ssh-debug.log")
        text = debug_log.read_text()
        assert f"port {node.port}" in text and KEY not in text
        failed, ready = [e for e in run.events("node_watchdog")]
        assert (failed["status"], failed["scope"]) == ("failed", "host"), failed
        assert "cannot reach the Vast API" in failed["reason"]
        assert ready["status"] == "ready"
        (abandoned,) = run.events("attempt_abandoned")
        assert (abandoned["scope"], abandoned["failure_kind"]) == ("host", "switch_failed")
        assert creates(fake) == 2 and len(fake.billing()) == 1
        down = await asyncio.to_thread(cli, "down", "--all", "--yes", env=env)
        assert down.returncode == 0, down.stderr
        assert fake.billing() == []


async def test_an_attached_dashboard_keeps_its_lease_past_three_silence_windows(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        idle_s = 6.0
        env = {
            **rented_env(fake, node, tmp_path, tiny_gguf),
            "MVP_IDLE_TEARDOWN_MINS": str(idle_s / 60),
        }
        app, seen = dashboard(env, tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await seen.first(is_(OffersListed))
            await pilot.pause()
            await pilot.press("enter")
            await pilot.pause()
            app.screen.query_one("#lease-go", Button).press()
            await seen.first(is_(NodeReady), within=120)
            verdict = await seen.first(is_(NodeWatchdog))
            assert verdict.status == "ready" and verdict.idle_teardown_mins  # type: ignore[attr-defined]
            # Time passing is what this test is about: three silence windows, attached.
            await asyncio.sleep(3 * idle_s + 2)
            assert len(fake.billing()) == 1, "the node destroyed a lease its dashboard held"
            assert not [e for e in seen.events if isinstance(e, NodeWatchdog)
                        and e.status == "fired"]
            await pilot.press("ctrl+q")
            await pilot.pause()
            app.screen.query_one("#choice-destroy", Button).press()
            await seen.first(is_(lease.LeaseDeleted), within=60)
        assert fake.billing() == []
        assert fake.destroyed_by(fake.destroyed()[0]) == "account"

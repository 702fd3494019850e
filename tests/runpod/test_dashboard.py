"""RunPod in the dashboard, by keys (Pilot), against the fake RunPod over real HTTP and a real
sshd started by the pod's own start command: the confirm, the lease, tokens, the receipt on
quit; and the restart check re-attaching to a pod an earlier (headless) run left serving."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button

from mvp_tui.engine.events import NodeReady, OffersListed
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.prompt.events import PromptDone
from mvp_tui.widgets.confirm import ConfirmScreen
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.prompt import PromptPane
from tests.e2e.headless import HeadlessRun
from tests.e2e.node import Node
from tests.fakes.runpod_server import FakeRunPod
from tests.prompt.engine import require_engine
from tests.runpod.conftest import assert_contract
from tests.runpod.test_e2e import A40, boot_pod, catalog, runpod_env, start_pod_command
from tests.tui.test_dashboard_run import dashboard, is_


def in_process(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The dashboard runs in this process, whose HOME is not the run's: name the key."""
    return {**env, "MVP_RUNPOD_SSH_IDENTITY": str(tmp_path / "home" / ".ssh" / "id_ed25519")}


def pod_booting(event: EngineEvent) -> bool:
    """The walk saw the pod RUNNING without SSH: its image is still starting sshd."""
    return isinstance(event, lease.LeasePending) and event.raw_state.startswith("RUNNING (no SSH")


async def test_runpod_from_the_board_to_tokens_and_quit_with_the_receipt(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    require_engine()
    with FakeRunPod() as fake:
        catalog(fake)
        fake.running_without_ssh(10**6)
        env = {**runpod_env(fake, node, tmp_path), "MVP_GGUF_LOCAL_PATH": str(tiny_gguf),
               "MVP_PROMPT_RPC_BIND": "127.0.0.1:0", "MVP_RUNPOD_GPU_TYPES": A40}
        app, seen = dashboard(in_process(env, tmp_path), tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            listed = await seen.first(is_(OffersListed), within=30)
            assert isinstance(listed, OffersListed)
            assert (listed.provider, listed.count) == ("runpod", 1)  # gpu_types = A40 only
            await pilot.pause()
            app.query_one(OffersPane).focus()
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, LeaseConfirmScreen)
            app.screen.query_one("#lease-go", Button).press()
            try:
                await seen.first(pod_booting, within=60)
            except TimeoutError:
                raise AssertionError([e.to_json()[:300] for e in seen.events]) from None
            (pod,) = fake.pods()
            await start_pod_command(node, fake, pod["id"])
            fake.show_ssh()
            ready = await seen.first(is_(NodeReady), within=90)
            assert isinstance(ready, NodeReady)
            await pilot.pause()
            app.query_one(PromptPane).focus()
            await pilot.press(*"hello pod", "enter")
            done = await seen.first(is_(PromptDone), within=60)
            assert isinstance(done, PromptDone) and done.tokens_generated >= 1
            app.query_one(OffersPane).focus()
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("enter")  # focus starts on "Destroy and quit"
            deleted = await seen.first(is_(lease.LeaseDeleted), within=60)
            await pilot.pause()
        assert isinstance(deleted, lease.LeaseDeleted) and deleted.billed_usd is not None
        assert fake.pods() == [] and fake.cloudflare_blocks == 0
        assert [r.body["gpu"]["id"] for r in fake.create_requests()] == [A40]
        assert_contract(fake)
    assert app.return_code == 0


async def test_a_pod_left_serving_is_reattached_on_restart_and_torn_down_on_quit(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    require_engine()
    with FakeRunPod() as fake:
        catalog(fake)
        fake.running_without_ssh(10**6)
        env = {**runpod_env(fake, node, tmp_path), "MVP_GGUF_LOCAL_PATH": str(tiny_gguf),
               "MVP_PROMPT_RPC_BIND": "127.0.0.1:0"}
        args = ["--yes", "--until", "ready"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            await boot_pod(run, fake, node)
            assert await run.finish(within=180) == 0, run.stderr
        (pod,) = fake.pods()
        app, seen = dashboard(in_process(env, tmp_path), tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            while not isinstance(app.screen, ConfirmScreen):
                await pilot.pause()
            app.screen.query_one("#choice-reattach", Button).press()
            ready = await seen.first(is_(NodeReady), within=60)
            assert isinstance(ready, NodeReady)
            assert not [e for e in seen.events if isinstance(e, lease.AttemptStarted)]
            await pilot.pause()
            app.query_one(PromptPane).focus()
            await pilot.press(*"again", "enter")
            done = await seen.first(is_(PromptDone), within=60)
            assert isinstance(done, PromptDone) and done.tokens_generated >= 1
            app.query_one(OffersPane).focus()
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("enter")  # Destroy and quit
            await seen.first(is_(lease.LeaseDeleted), within=60)
        assert fake.pods() == [] and fake.destroyed_by(pod["id"]) == "account"
        assert len(fake.create_requests()) == 1, "re-attached, never rented again"
        assert_contract(fake)

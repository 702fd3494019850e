"""Every way out of the dashboard, with a Vast lease live (fake Vast over real HTTP): each
goes through the quit question or the same stop, and ends with the fake holding nothing that
bills — or with exit 3 and the lease kept in the record when the user chose to keep it.

The lease is live and its node still being brought up (SSH to a closed port keeps retrying),
which is the moment a stray exit used to leave billing."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import Button

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.events import OffersListed, RunState, RunStateChanged
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.ui_port import UiPort
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.tui.app import MvpApp
from mvp_tui.tui.dashboard import after_app
from mvp_tui.tui.last_resort import settle_run
from mvp_tui.widgets.confirm import ConfirmScreen
from tests.fakes.vastai_server import FakeVast
from tests.prompt.waiting import WaitingSink
from tests.tui.apps import FIXED_NOW, engine_of

KEY = "fake-vast-key-0123456789"


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def fake(closed_port: int) -> Iterator[FakeVast]:
    with FakeVast(api_key=KEY) as server:
        server.ssh_endpoint = ("127.0.0.1", closed_port, True)
        server.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        yield server


def vast_env(fake: FakeVast, tmp_path: Path) -> dict[str, str]:
    import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(tmp_path / "id"))
    (tmp_path / "id").chmod(0o600)
    return {
        "MVP_NODE_PROVIDER": "vastai",
        "VASTAI_API_KEY": KEY,
        "MVP_VASTAI_API_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(tmp_path / "id"),
        "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_LEASE_RECONCILE_WAITS_SECS": "0.05,0.1",
        "MVP_SSH_READY_TIMEOUT_SECS": "600",  # bring-up keeps retrying: the lease stays live
        "MVP_SSH_RETRY_INITIAL_SECS": "0.2",
        "MVP_SSH_CONNECT_TIMEOUT_SECS": "2",
        "MVP_STATE_DIR": str(tmp_path / "state"),
    }


def dashboard(fake: FakeVast, tmp_path: Path) -> tuple[MvpApp, WaitingSink]:
    env = vast_env(fake, tmp_path)
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    sink, seen = UiPort(), WaitingSink()

    def tee(event: EngineEvent) -> None:
        sink(event)
        seen(event)

    engine = RunEngine(config, tee, environ={})
    return MvpApp(config, engine=engine, sink=sink, clock=lambda: FIXED_NOW), seen


def is_(cls: type[EngineEvent]):  # type: ignore[no-untyped-def]
    return lambda e: isinstance(e, cls)


async def lease_live(app: MvpApp, pilot, seen: WaitingSink) -> None:  # type: ignore[no-untyped-def]
    """Enter on the cheapest offer, confirm, and wait until the lease runs and bring-up
    has begun."""
    await seen.first(is_(OffersListed))
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()
    app.screen.query_one("#lease-go", Button).press()
    await seen.first(is_(lease.LeaseRunning), within=30)
    await seen.first(
        lambda e: isinstance(e, RunStateChanged) and e.state == RunState.BRINGING_UP.value
    )
    await pilot.pause()


def open_in_record(tmp_path: Path) -> list[str]:
    ids = []
    for path in (tmp_path / "state" / "runs").glob("*/record.json"):  # not endpoint.json
        record = json.loads(path.read_text())
        ids += [x["provider_id"] for x in record["leases"] if x["state"] != "deleted"]
    return ids


async def answer(pilot, choice: str) -> None:  # type: ignore[no-untyped-def]
    app = pilot.app
    for _ in range(50):  # the question is pushed on the next message
        if isinstance(app.screen, ConfirmScreen):
            break
        await pilot.pause()
    assert isinstance(app.screen, ConfirmScreen), "no quit question was asked"
    app.screen.query_one(f"#choice-{choice}", Button).press()


async def until_exiting(pilot, within: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Poll the app's own exit flag (set only once the run was stopped)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not pilot.app._exit:
        assert loop.time() < deadline, "the app did not exit"
        await pilot.pause(0.05)


EXITS = ["q", "ctrl+c", "ctrl+q", "palette", "app.exit"]


async def press_exit(pilot, how: str) -> None:  # type: ignore[no-untyped-def]
    app: MvpApp = pilot.app
    if how == "palette":
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"quit")
        for _ in range(50):  # the palette searches in the background
            await pilot.pause()
            if "Quit" in str(app.screen.query("CommandList").first().render_lines):
                break
        await pilot.press("enter")
    elif how == "app.exit":
        app.exit()
    else:
        await pilot.press(how)
    await pilot.pause()


@pytest.mark.parametrize("how", EXITS)
async def test_each_exit_asks_and_destroy_leaves_nothing_billing(
    how: str, fake: FakeVast, tmp_path: Path
) -> None:
    app, seen = dashboard(fake, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await lease_live(app, pilot, seen)
        assert len(fake.billing()) == 1
        await press_exit(pilot, how)
        await answer(pilot, "destroy")
        await seen.first(is_(lease.LeaseDeleted), within=60)
        await until_exiting(pilot)
    assert fake.billing() == []
    assert app.return_code == 0
    assert open_in_record(tmp_path) == []
    assert after_app(app, engine_of(app)) == 0  # what the CLI exits with


@pytest.mark.parametrize("how", ["ctrl+q", "palette", "app.exit"])
async def test_cancel_keeps_the_app_and_the_lease(how: str, fake: FakeVast, tmp_path: Path) -> None:
    app, seen = dashboard(fake, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await lease_live(app, pilot, seen)
        await press_exit(pilot, how)
        await answer(pilot, "cancel")
        await pilot.pause()
        assert not app._exit, "cancel must not exit"
        assert len(fake.billing()) == 1
        # Leaving without an answer (the test harness's own shutdown, like a crash) still
        # tears down: the app's unmount stops the run.
    await seen.first(is_(lease.LeaseDeleted), within=60)
    assert fake.billing() == []


async def test_keep_exits_3_and_names_the_lease(
    fake: FakeVast, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app, seen = dashboard(fake, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await lease_live(app, pilot, seen)
        running = await seen.first(is_(lease.LeaseRunning))
        await press_exit(pilot, "ctrl+q")
        await answer(pilot, "keep")
        await until_exiting(pilot)
    assert app.return_code == 3
    provider_id = running.provider_id  # type: ignore[attr-defined]
    assert [str(i["id"]) for i in fake.billing()] == [provider_id]
    assert open_in_record(tmp_path) == [provider_id]
    code = after_app(app, engine_of(app))  # what the CLI exits with
    assert code == 3
    assert provider_id in capsys.readouterr().err


async def test_a_crash_in_the_app_still_destroys(fake: FakeVast, tmp_path: Path) -> None:
    """An exception in a handler ends the app: the unmount stops the run, destroy confirmed."""
    app, seen = dashboard(fake, tmp_path)
    with pytest.raises(ZeroDivisionError):
        async with app.run_test(size=(160, 48)) as pilot:
            await lease_live(app, pilot, seen)
            app.call_later(lambda: 1 / 0)
            await pilot.pause()
            await pilot.pause()
    assert fake.billing() == []
    assert open_in_record(tmp_path) == []


async def test_teardown_key_while_bringing_up_then_quit_needs_no_question(
    fake: FakeVast, tmp_path: Path
) -> None:
    app, seen = dashboard(fake, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await lease_live(app, pilot, seen)
        await pilot.press("ctrl+d")
        await answer(pilot, "destroy")  # the Leases pane's own confirm
        await seen.first(is_(lease.LeaseDeleted), within=60)
        await seen.first(lambda e: isinstance(e, RunStateChanged) and e.state == "ended")
        await pilot.pause()
        assert fake.billing() == []
        assert not app._exit, "a teardown is not a quit"
        await pilot.press("ctrl+q")  # nothing bills any more: no question
        await until_exiting(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
    assert app.return_code == 0


def test_after_a_dashboard_that_never_stopped_its_run_the_record_is_torn_down(
    fake: FakeVast, tmp_path: Path
) -> None:
    """The net under the app: a run whose dashboard died without a stop (no result) is
    destroyed from its record by a fresh provider client; exit 0 once confirmed."""
    from tests.e2e.test_vast_headless import cli

    env = vast_env(fake, tmp_path)
    up = cli("up", "--headless", "--yes", "--until", "leased", env=env)
    assert up.returncode == 0, up.stderr
    (row,) = [json.loads(line) for line in cli("ls", "--json", env=env).stdout.splitlines()]
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    assert len(fake.billing()) == 1
    assert settle_run(config, row["run"], None).exit_code == 0
    assert fake.billing() == []
    assert open_in_record(tmp_path) == []

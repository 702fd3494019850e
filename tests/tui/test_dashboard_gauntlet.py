"""The dashboard survives its hosts with one Enter: the cheapest offer's SSH never answers,
the next one's instance exits during bring-up, the third serves. Both bad hosts are
destroyed, confirmed; the prompt box opens on the good one; quitting destroys it too."""

from __future__ import annotations

import socket
from pathlib import Path

from textual.widgets import Button

from mvp_tui.engine.events import AttemptAbandoned, NodeReady, OffersListed, ReadySummary
from mvp_tui.lease import events as lease
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.leases import LeasesPane
from tests.e2e.node import Node
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.fakes.vastai_server import FakeVast
from tests.prompt.engine import require_engine
from tests.ssh.sshd import free_port
from tests.tui.test_dashboard_restart import _env
from tests.tui.test_dashboard_run import KEY, dashboard, is_


async def test_one_enter_walks_past_two_bad_hosts_to_a_serving_node(
    node: Node, tmp_path: Path
) -> None:
    require_engine()
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    with socket.socket() as hang, FakeVast(api_key=KEY) as fake:
        hang.bind(("127.0.0.1", 0))
        hang.listen(8)  # accepts, never answers: a host whose sshd hangs
        unreachable = fake.add_offer(dph_total=0.10)
        exiting = fake.add_offer(dph_total=0.20)
        good = fake.add_offer(dph_total=0.30)
        fake.offer_ssh[unreachable] = ("127.0.0.1", free_port(), True)
        fake.offer_ssh[exiting] = ("127.0.0.1", hang.getsockname()[1], True)
        fake.offer_ssh[good] = ("127.0.0.1", node.sshd.port, True)
        fake.exit_after_running(exiting, 3)
        env = {**_env(fake, node.client_key, tmp_path), "MVP_GGUF_LOCAL_PATH": str(model),
               "MVP_SSH_READY_TIMEOUT_SECS": "12", "MVP_SSH_CONNECT_TIMEOUT_SECS": "2"}
        app, seen = dashboard(env, tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await seen.first(is_(OffersListed))
            await pilot.pause()
            await pilot.press("enter")  # the cheapest offer, then the next ones
            await pilot.pause()
            app.screen.query_one("#lease-go", Button).press()
            await seen.first(is_(NodeReady), within=120)
            await pilot.pause()
            abandoned = [e for e in seen.events if isinstance(e, AttemptAbandoned)]
            assert [e.failure_kind for e in abandoned] == ["ssh_unreachable", "instance_exited"]
            (live,) = fake.billing()
            assert live["id"] not in {int(e.provider_id) for e in abandoned}
            assert sorted(fake.destroyed()) == sorted(int(e.provider_id) for e in abandoned)
            assert app.status.ledger.live == 1
            assert app.focused is app.query_one("#prompt-input")
            history = app.query_one(LeasesPane).model.full_text()
            assert "failed at ssh" in history and "walk order (vastai)" in history
            # The summary at ready: the serving attempt's stages, the money of all three hosts.
            summary = await seen.first(is_(ReadySummary))
            assert isinstance(summary, ReadySummary)
            assert [word for word, _ in summary.stages][:2] == ["image", "ssh"]
            assert summary.seconds >= sum(secs for _, secs in summary.stages)
            assert summary.spent_usd > 0 and summary.text.startswith("ready in ")
            assert summary.text in str(app.query_one(BootstrapPane).checklist_text(100, 30))
            app.query_one(LeasesPane).focus()
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("enter")  # "Destroy and quit"
            await seen.first(lambda e: isinstance(e, lease.LeaseDeleted)
                             and e.provider_id == str(live["id"]), within=60)
            await pilot.pause()
        assert fake.billing() == []
    assert app.return_code == 0

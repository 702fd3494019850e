"""Two installs, one account (issue 36): two state dirs lease a run each on one fake Vast
account, both with the seed's fixed run id 41 (`up --headless --until leased`: serving needs
an SSH node the fake does not give). Each one's `down 41` and `down --all` leave the other's
instance alive, and each one's account check reports the other's as not its own."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.install_tag import kept_tag
from tests.e2e.headless import HeadlessRun, event
from tests.e2e.test_vast_headless import cli
from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import KEY, vast_env


@pytest.fixture
def fake() -> Iterator[FakeVast]:
    with socket.socket() as closed, FakeVast(api_key=KEY, loading_polls=1) as server:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: SSH is refused (not needed)
        server.ssh_endpoint = ("127.0.0.1", closed.getsockname()[1], True)
        for _ in range(4):
            server.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        yield server


def _install(fake: FakeVast, tmp_path: Path, name: str) -> dict[str, str]:
    identity = tmp_path / f"id_{name}"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(identity))
    identity.chmod(0o600)
    return {
        **vast_env(fake, identity, tmp_path / name),
        "MVP_RUN_ID": "41",  # the same fixed run id on both machines
        "XDG_CONFIG_HOME": str(tmp_path / f"xdg-{name}"),
    }


def _lease(env: dict[str, str]) -> str:
    up = cli("up", "--headless", "--yes", "--until", "leased", env=env)
    assert up.returncode == 0, up.stderr
    events = [json.loads(line) for line in up.stdout.splitlines()]
    return str(next(e for e in events if e["event"] == "lease_running")["provider_id"])


def _live(fake: FakeVast) -> dict[str, str]:
    return {str(row["id"]): str(row["label"]) for row in fake.billing()}


def test_each_install_ends_only_its_own_run_41(fake: FakeVast, tmp_path: Path) -> None:
    a, b = _install(fake, tmp_path, "a"), _install(fake, tmp_path, "b")
    ours_a, ours_b = _lease(a), _lease(b)
    tag_a, tag_b = kept_tag(a["MVP_STATE_DIR"]), kept_tag(b["MVP_STATE_DIR"])
    assert tag_a and tag_b and tag_a != tag_b
    live = _live(fake)
    assert live[ours_a].startswith(f"mvp-{tag_a}-41-")
    assert live[ours_b].startswith(f"mvp-{tag_b}-41-")

    down = cli("down", "41", "--yes", env=a)
    assert down.returncode == 0, down.stderr
    assert set(_live(fake)) == {ours_b}, "A's `down 41` left B's run 41"
    assert f"`mvp-tui down --instance vastai:{ours_b}`" in down.stderr
    assert f"another install's tag ({tag_b})" in down.stderr

    again_a = _lease(a.copy() | {"MVP_RUN_ID": "42"})
    down = cli("down", "--all", "--yes", env=a)
    assert down.returncode == 0, down.stderr
    assert set(_live(fake)) == {ours_b}, "A's `down --all` left B's run"
    assert int(again_a) in fake.destroyed()
    assert "1 instance named like mvp-tui runs was not made here" in down.stderr

    ours_a = _lease(a.copy() | {"MVP_RUN_ID": "43"})
    down = cli("down", "--all", "--yes", env=b)
    assert down.returncode == 0, down.stderr
    assert set(_live(fake)) == {ours_a}, "B's `down --all` left A's run"
    assert f"another install's tag ({tag_a})" in down.stderr
    assert cli("down", "--all", "--yes", env=a).returncode == 0
    assert _live(fake) == {}


def test_a_run_s_own_teardown_with_a_fixed_id_leaves_the_other_install_s(
    fake: FakeVast, tmp_path: Path
) -> None:
    """The seed's `run_id = 41` on two machines: B's run ends (`--down-after`: its own
    teardown and account check, scoped to run 41) while A's run 41 is leased."""
    a, b = _install(fake, tmp_path, "a"), _install(fake, tmp_path, "b")
    ours_a = _lease(a)
    up = cli("up", "--headless", "--yes", "--until", "leased", "--down-after", env=b)
    assert up.returncode == 0, up.stderr
    assert set(_live(fake)) == {ours_a}, "B's teardown of its run 41 left A's run 41"
    assert f"`mvp-tui down --instance vastai:{ours_a}`" in up.stderr
    assert cli("down", "--all", "--yes", env=a).returncode == 0
    assert _live(fake) == {}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signalled_headless_run_41_leaves_the_other_install_s(
    fake: FakeVast, tmp_path: Path, sig: signal.Signals
) -> None:
    """B is stopped by a signal while its lease of run 41 comes up (its own teardown and
    account check); A's run 41, leased before, stays, and B's receipt names it not its own."""
    a, b = _install(fake, tmp_path, "a"), _install(fake, tmp_path, "b")
    ours_a = await asyncio.to_thread(_lease, a)
    for offer in fake.offers():  # B's lease stays loading
        fake.stick_loading(int(offer["id"]))
    async with HeadlessRun(["--yes"], tmp_path / "b", env=b) as run:
        await run.until(event("lease_pending"))
        run.signal(sig)
        code = await run.finish()
    assert code == 1 and run.events("lease_deleted")
    assert set(_live(fake)) == {ours_a}, "B's teardown left A's run 41"
    (checked,) = run.events("account_checked")
    assert checked["strangers"] == [f"vastai:{ours_a}"] and checked["nothing_bills"]

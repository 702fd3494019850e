"""Renting on Vast.ai from the command line, against the fake Vast server over real HTTP:
`offers`, `up --headless --until leased`, `ls`, `down`, a killed run recovered by `down --all`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from tests.e2e.headless import HeadlessRun, event
from tests.fakes.vastai_server import FakeVast

KEY = "fake-vast-key-0123456789"
AT_50_GB = 0.30 + 0.15 * (50 - 8) / 730  # the 3090's $/h with the default 50 GB disk


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port held bound but not listening: connections to it are refused, and no
    other test's server can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def fake(closed_port: int) -> Iterator[FakeVast]:
    with FakeVast(api_key=KEY, loading_polls=1) as server:
        server.ssh_endpoint = ("127.0.0.1", closed_port, True)
        server.add_offer(dph_total=0.50, gpu_name="RTX 4090")
        server.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        server.add_offer(dph_total=2.50, gpu_name="H100 SXM")
        yield server


@pytest.fixture
def vast_env(fake: FakeVast, tmp_path: Path) -> dict[str, str]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    identity = tmp_path / "id_ed25519"
    key.write_private_key(str(identity))
    identity.chmod(0o600)
    return {
        "MVP_NODE_PROVIDER": "vastai",
        "VASTAI_API_KEY": KEY,
        "VAST_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(identity),
        "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_LEASE_RECONCILE_WAITS_SECS": "0.05,0.1",
        "MVP_LEASE_DESTROY_BACKOFF_SECS": "0.05",  # six refusals in 1.6 s, not 31 s
        "MVP_MAX_PRICE_PER_HOUR": "1.0",
        "MVP_STATE_DIR": str(tmp_path / "state"),
    }


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    return subprocess.run([sys.executable, "-m", "mvp_tui", *args], capture_output=True,
                          text=True, env={**base, **env}, timeout=120)


def no_key_anywhere(state: Path, *texts: str) -> None:
    for path in state.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    for text in texts:
        assert KEY not in text


def test_offers_json_is_filtered_and_sorted(vast_env: dict[str, str], tmp_path: Path) -> None:
    result = cli("offers", "--json", env=vast_env)
    assert result.returncode == 0, result.stderr
    offers = json.loads(result.stdout)
    assert [o["gpu_name"] for o in offers] == ["RTX 3090", "RTX 4090"]  # H100 is over the cap
    # All-in as the CLI searches it: the offer's 0.30 at Vast's default 8 GB, plus the
    # [vastai] disk_gb = 50 the create rents (allocated_storage; 0.15 $/GB/month ÷ 730 h).
    assert offers[0]["price_per_hour"] == pytest.approx(AT_50_GB)
    table = cli("offers", env=vast_env)
    assert "RTX 3090" in table.stdout.splitlines()[1]
    no_key_anywhere(tmp_path / "state", result.stdout, result.stderr, table.stdout)


def test_headless_needs_yes_to_rent(vast_env: dict[str, str], fake: FakeVast) -> None:
    result = cli("up", "--headless", "--until", "leased", env=vast_env)
    assert result.returncode == 2 and "--yes" in result.stderr
    assert fake.instances() == []


def test_until_leased_then_ls_and_down(
    vast_env: dict[str, str], fake: FakeVast, tmp_path: Path
) -> None:
    up = cli("up", "--headless", "--yes", "--until", "leased", env=vast_env)
    assert up.returncode == 0, up.stderr
    records = [json.loads(line) for line in up.stdout.splitlines()]
    running = next(r for r in records if r["event"] == "lease_running")
    assert running["price_per_hour"] == pytest.approx(AT_50_GB)
    assert len(fake.billing()) == 1  # deliberately kept, recorded for `down`
    assert fake.account_keys, "the SSH public key was registered before the create"
    ls = cli("ls", "--json", env=vast_env)
    (row,) = [json.loads(line) for line in ls.stdout.splitlines()]
    assert row["provider_id"] == running["provider_id"] and row["state"] == "running"
    down = cli("down", "--all", "--yes", env=vast_env)
    assert down.returncode == 0, down.stderr
    assert fake.billing() == []
    assert cli("ls", "--json", env=vast_env).stdout.strip() == ""
    no_key_anywhere(tmp_path / "state", up.stdout, up.stderr, down.stdout, down.stderr)


def test_down_after_tears_down_confirmed(vast_env: dict[str, str], fake: FakeVast) -> None:
    up = cli("up", "--headless", "--yes", "--until", "leased", "--down-after", env=vast_env)
    assert up.returncode == 0, up.stderr
    events = [json.loads(line)["event"] for line in up.stdout.splitlines()]
    assert events.index("lease_running") < events.index("lease_deleted")
    assert fake.billing() == []


def test_unconfirmed_delete_exits_3(vast_env: dict[str, str], fake: FakeVast) -> None:
    fake.fail_destroy(None, times=1000)
    env = {**vast_env, "MVP_LEASE_DELETE_TIMEOUT_SECS": "1"}
    up = cli("up", "--headless", "--yes", "--until", "leased", "--down-after", env=env)
    assert up.returncode == 3, up.stderr
    assert "may still bill" in up.stderr
    assert len(fake.billing()) == 1
    fake._destroy_failures.clear()  # the provider recovers: `down` finishes the job
    assert cli("down", "--all", "--yes", env=vast_env).returncode == 0
    assert fake.billing() == []


async def test_killed_run_is_found_and_destroyed_by_down_all(
    vast_env: dict[str, str], fake: FakeVast, tmp_path: Path
) -> None:
    fake.stick_loading(1001)
    fake.stick_loading(1002)
    async with HeadlessRun(["--yes"], tmp_path / "state", env=vast_env) as run:
        created = await run.until(
            lambda r: r.get("event") == "attempt_answered" and r.get("outcome") == "created"
        )
        run.signal(signal.SIGKILL)
        await run.finish()
    assert [i["id"] for i in fake.billing()] == [int(created["provider_id"])]
    down = await asyncio.to_thread(cli, "down", "--all", "--yes", env=vast_env)
    assert down.returncode == 0, down.stderr
    assert fake.billing() == []


async def test_sigint_during_the_walk_destroys_what_was_leased(
    vast_env: dict[str, str], fake: FakeVast, tmp_path: Path
) -> None:
    fake.stick_loading(1002)
    async with HeadlessRun(["--yes"], tmp_path / "state", env=vast_env) as run:
        await run.until(event("lease_pending"))
        run.signal(signal.SIGINT)
        code = await run.finish()
    assert code == 1
    assert run.events("lease_deleted")
    assert fake.billing() == []


def test_spend_limit_tears_the_lease_down(vast_env: dict[str, str], fake: FakeVast) -> None:
    # $0.30/h → spend grows ~0.0001 $/s: a cap of $0.00005 is reached within a second.
    env = {**vast_env, "MVP_MAX_SPEND_USD": "0.00005"}
    up = cli("up", "--headless", "--yes", "--until", "ready", env=env)
    assert up.returncode == 1, up.stderr
    records = [json.loads(line) for line in up.stdout.splitlines()]
    (limit,) = [r for r in records if r["event"] == "limit_reached"]
    assert limit["limit"] == "max_spend_usd" and limit["reached"] >= 0.00005
    assert "[limits] max_spend_usd" in up.stderr
    assert [r["event"] for r in records].count("lease_deleted") == 1
    assert fake.billing() == []


def test_a_host_below_the_images_cuda_floor_is_never_rented_even_by_offer_id(
    vast_env: dict[str, str], fake: FakeVast
) -> None:
    """A server that lets a host below the image's CUDA floor (12.8, the pinned image's)
    through the search: the headless walk skips it though it is the cheapest, and naming it
    with --offer is refused before anything is created."""
    fake.unfiltered = {"cuda_max_good"}
    old = fake.add_offer(dph_total=0.10, gpu_name="RTX 3090", cuda_max_good=12.4)
    listed = json.loads(cli("offers", "--json", env=vast_env).stdout)
    (row,) = [o for o in listed if str(o["offer_id"]) == str(old)]  # listed, marked
    assert "cuda_max_good 12.4 < the image's CUDA floor 12.8" in row["refused"]
    table = cli("offers", env=vast_env).stdout
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"{old} ")]
    assert "never rented: cuda_max_good 12.4" in line

    by_hand = cli("up", "--headless", "--yes", "--until", "leased", "--offer", str(old),
                  env=vast_env)
    assert by_hand.returncode == 2, by_hand.stderr
    assert "never rented" in by_hand.stderr and "cuda_max_good 12.4" in by_hand.stderr
    assert [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path] == []

    up = cli("up", "--headless", "--yes", "--until", "leased", "--down-after", env=vast_env)
    assert up.returncode == 0, up.stderr
    creates = [r.path for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
    assert creates and all(f"/asks/{old}/" not in p for p in creates)
    assert fake.billing() == []

"""Contract: the official `vastai` CLI (pinned 1.9.1, in .venv-vastai) against FakeVast.

If the real client reads the fake's answers as it reads Vast's, the fake speaks the real
API, and the provider tests built on it mean something. The CLI lives in its own venv
(scripts/vastai-cli-venv.sh) because it pins cryptography==49.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.providers.base import CreateRequest, LeaseState, SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider, bid_mismatch
from tests.fakes.vastai_server import FakeVast
from tests.peers import missing_peer

REPO = Path(__file__).resolve().parents[2]
CLI_VERSION = "1.9.1"


@pytest.fixture(scope="module")
def vastai_cli() -> Path:
    cli = Path(os.environ.get("VASTAI_CLI", REPO / ".venv-vastai" / "bin" / "vastai"))
    if not os.access(cli, os.X_OK):
        missing_peer(
            "vastai CLI",
            f"{cli} not found",
            "bash scripts/vastai-cli-venv.sh (creates .venv-vastai with vastai==1.9.1)",
        )
    python = cli.parent / "python"
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('vastai'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    ).stdout.strip()
    if version != CLI_VERSION:
        missing_peer(
            "vastai CLI",
            f"{cli} is vastai {version or '?'}, the contract is pinned to {CLI_VERSION}",
            "bash scripts/vastai-cli-venv.sh (recreates .venv-vastai)",
        )
    return cli


def run_cli(cli: Path, fake: FakeVast, home: Path, *args: str, key: str | None = None) -> Any:
    """Run `vastai --url <fake> --api-key K --raw ARGS`; return its parsed JSON stdout."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),  # the CLI caches its role and GPU names under XDG dirs
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_STATE_HOME": str(home / "state"),
        "VASTAI_NO_UPDATE_CHECK": "1",
    }
    command = [str(cli), "--url", fake.url, "--api-key", key or fake.api_key, "--raw", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return {"stderr": done.stderr}
    try:
        return json.loads(done.stdout)
    except ValueError:  # some commands print a sentence even with --raw (`stop instance`)
        return {"stdout": done.stdout}


async def test_search_offers_agrees_with_the_provider(
    vastai_cli: Path, fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    """The CLI's search (`--storage 50`, CUDA and disk filters) and the provider's with
    `disk_gb = 50` and the image's CUDA floor send the same filters and get the same offers at
    the same all-in prices: `dph_total` with 50 GB of storage in it."""
    cheap = fake.add_offer(dph_total=0.21)
    mid = fake.add_offer(dph_total=0.35)
    fake.add_offer(dph_total=1.40)  # over the price cap
    fake.add_offer(dph_total=0.25, gpu_name="A100 PCIE")
    fake.add_offer(dph_total=0.15, verification="unverified")  # the CLI's default drops it
    fake.add_offer(dph_total=0.16, cuda_max_good=12.4)  # its driver cannot start the image
    fake.add_offer(dph_total=0.17, disk_space=30.0)  # no room for the 50 GB disk

    rows = run_cli(
        vastai_cli, fake, tmp_path, "search", "offers",
        "gpu_name=RTX_4090 dph<1 cuda_max_good>=12.8 disk_space>=50", "-o", "dph+",
        "--storage", "50",
    )

    assert [row["id"] for row in rows] == [cheap, mid]
    (request,) = [r for r in fake.requests if r.path == "/api/v0/bundles/"]
    assert request.body["gpu_name"] == {"eq": "RTX 4090"}
    assert request.body["order"] == [["dph_total", "asc"]]
    assert request.body["allocated_storage"] == 50.0

    offers = await provider.search_offers(
        SelectionPolicy(gpu_name="RTX 4090", max_price_per_hour=1.0, min_cuda=12.8, disk_gb=50)
    )
    ours = [r for r in fake.requests if r.path == "/api/v0/bundles/"][-1]
    assert ours.body["allocated_storage"] == request.body["allocated_storage"]
    for name in ("cuda_max_good", "disk_space"):  # the CLI sends the numbers as text
        (op, theirs), = request.body[name].items()
        assert ours.body[name] == {op: float(theirs)}, name
    assert [o.offer_id for o in offers] == [str(cheap), str(mid)]
    assert [o.price_per_hour for o in offers] == [row["dph_total"] for row in rows]
    assert rows[0]["dph_total"] == pytest.approx(0.21 + 0.15 * (50 - 8) / 730, abs=1e-6)
    assert [o.gpu_ram_mib for o in offers] == [row["gpu_ram"] for row in rows]


async def test_show_instances_lists_what_the_provider_created(
    vastai_cli: Path, fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    created = []
    for node in (1, 2):
        fake.add_offer()
        offers = await provider.search_offers(SelectionPolicy())
        request = CreateRequest(f"mvp-r1-n{node}", "img:1", {"MVP_NODE": str(node)}, 20)
        result = await provider.create(offers[0], request)
        created.append(int(result.provider_id or 0))

    rows = run_cli(vastai_cli, fake, tmp_path, "show", "instances")

    assert [row["id"] for row in rows] == created
    assert [row["label"] for row in rows] == ["mvp-r1-n1", "mvp-r1-n2"]
    assert rows[0]["extra_env"] == {"MVP_NODE": "1"}  # the CLI turns the pairs into a dict
    (listing,) = [r for r in fake.requests if r.path == "/api/v1/instances/"]
    assert listing.query["limit"] == "25"
    assert listing.headers["authorization"] == f"Bearer {fake.api_key}"
    assert all(fake.api_key not in r.path + json.dumps(r.query) for r in fake.requests)

    one = run_cli(vastai_cli, fake, tmp_path, "show", "instance", str(created[0]))
    assert (one["id"], one["label"]) == (created[0], "mvp-r1-n1")


async def test_destroy_instance_is_seen_by_the_provider(
    vastai_cli: Path, fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    doomed = fake.add_instance(label="mvp-r1-n1")
    kept = fake.add_instance(label="mvp-r1-n2")

    run_cli(vastai_cli, fake, tmp_path, "destroy", "instance", str(doomed), "-y")

    assert fake.destroyed() == [doomed]
    assert (await provider.get(str(doomed))).state is LeaseState.GONE
    remaining = await provider.list_by_label("mvp-r1-")
    assert [s.provider_id for s in remaining] == [str(kept)]
    rows = run_cli(vastai_cli, fake, tmp_path, "show", "instances")
    assert [row["id"] for row in rows] == [kept]


def test_wrong_key_gets_the_real_auth_error(
    vastai_cli: Path, fake: FakeVast, tmp_path: Path
) -> None:
    out = run_cli(vastai_cli, fake, tmp_path, "show", "instances", key="not-the-key-123456")
    error = json.loads(out["stderr"])
    assert (error["status_code"], error["msg"]) == (401, "Invalid user key")


async def test_a_bid_as_the_cli_makes_it_is_one_our_check_accepts(
    vastai_cli: Path, fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    """`create instance --bid_price` sends `price` (what our bids send); the instance it makes
    reads, through the CLI and our provider alike, as a bid at that price; a bid under the
    floor answers an error with `new_contract` and leaves that instance stopped."""
    ask = fake.add_offer(min_bid=0.20, dph_total=0.50, dph_base=0.48)
    made = run_cli(vastai_cli, fake, tmp_path, "create", "instance", str(ask), "--image",
                   "img:1", "--disk", "20", "--bid_price", "0.25")
    (put,) = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
    assert put.body["price"] == 0.25
    row = run_cli(vastai_cli, fake, tmp_path, "show", "instance", str(made["new_contract"]))
    assert row["is_bid"] is True and row["dph_base"] == 0.25
    assert bid_mismatch(row, 0.25) is None and bid_mismatch(row, 0.20) is not None

    low = fake.add_offer(min_bid=0.20)
    refused = run_cli(vastai_cli, fake, tmp_path, "create", "instance", str(low), "--image",
                      "img:1", "--disk", "20", "--bid_price", "0.05")
    assert refused["success"] is False and refused["new_contract"]
    status = await provider.get(str(refused["new_contract"]))
    assert status.state is LeaseState.STOPPED  # it exists and bills storage: destroy it


async def test_a_stopped_instance_and_a_paused_bid_as_the_cli_and_the_provider_see_them(
    vastai_cli: Path, fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    """The states the account check destroys (issue 28 §3): stopped by the CLI's own
    `stop instance` (the fake's PUT {"state": "stopped"}), and a bid Vast paused."""
    stopped = fake.add_instance(label="mvp-r-1-1-1")
    paused = fake.add_instance(label="mvp-r-1-1-2")
    fake.outbid_instance(paused)

    said = run_cli(vastai_cli, fake, tmp_path, "stop", "instance", str(stopped))
    assert said == {"stdout": f"stopping instance {stopped}.\n"}
    rows = {row["id"]: row for row in run_cli(vastai_cli, fake, tmp_path, "show", "instances")}

    for instance in (stopped, paused):
        row = rows[instance]
        assert (row["actual_status"], row["intended_status"], row["cur_state"],
                row["next_state"]) == ("stopped", "stopped", "stopped", "stopped")
    assert rows[paused]["is_bid"] is True
    listed = {s.provider_id: s for s in await provider.list_by_label("mvp-r-1-")}
    assert {s.state for s in listed.values()} == {LeaseState.STOPPED}
    assert listed[str(stopped)].raw_state == "stopped"
    assert listed[str(paused)].raw_state == "paused bid (stopped, outbid)"

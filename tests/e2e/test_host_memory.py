"""Host memory from the command line, against the fake Vast server over real HTTP: a journal
that says the cheapest offer's machine just failed makes the next `up --headless` create on
the other offer first; `offers --json` badges it and lists it last; `hosts` lists the journal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from mvp_tui.lease.host_journal import HostJournal, HostOutcome
from tests.fakes.vastai_server import FakeVast

KEY = "fake-vast-key-0123456789"
REASON = "SSH refused after 12 tries (the host's sshd never answered)"


@pytest.fixture
def fake() -> Iterator[FakeVast]:
    with FakeVast(api_key=KEY, loading_polls=1) as server:
        server.add_offer(dph_total=0.50, gpu_name="RTX 4090")
        server.add_offer(dph_total=0.30, gpu_name="RTX 3090")  # the cheapest
        yield server


@pytest.fixture
def env(fake: FakeVast, tmp_path: Path) -> dict[str, str]:
    identity = tmp_path / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(identity))
    identity.chmod(0o600)
    return {
        "MVP_VASTAI_SSH_IDENTITY": str(identity),
        "MVP_NODE_PROVIDER": "vastai",
        "VASTAI_API_KEY": KEY,
        "VAST_URL": fake.url,
        "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_LEASE_RECONCILE_WAITS_SECS": "0.05,0.1",
        "MVP_STATE_DIR": str(tmp_path / "state"),
    }


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    return subprocess.run([sys.executable, "-m", "mvp_tui", *args], capture_output=True,
                          text=True, env={**base, **env}, timeout=120)


def offers_by_price(fake: FakeVast) -> list[dict[str, Any]]:
    return sorted(fake.offers(), key=lambda o: float(o["dph_total"]))


def remember_failure(state: Path, offer: dict[str, Any], *, ago: float = 3600) -> None:
    """The journal line an earlier run's engine writes when this offer's machine failed."""
    HostJournal(state).append(
        HostOutcome(
            at=time.time() - ago,
            run_id="r-earlier",
            provider="vastai",
            host=str(offer["machine_id"]),
            offer_id=str(offer["id"]),
            gpu_name=str(offer["gpu_name"]),
            stage="ssh",
            ok=False,
            reason=REASON,
            stage_secs={"create": 1.0, "running": 30.0, "ssh": 120.0},
            cost_usd=0.012,
        )
    )


def created_ask_ids(fake: FakeVast) -> list[int]:
    """The offer ids the fake was asked to create on, in order (`PUT /asks/<id>/`)."""
    ids = []
    for request in fake.requests:
        found = re.fullmatch(r"/api/v0/asks/(\d+)/?", request.path)
        if request.method == "PUT" and found:
            ids.append(int(found.group(1)))
    return ids


def test_without_memory_the_cheapest_offer_is_created_first(
    fake: FakeVast, env: dict[str, str]
) -> None:
    cheapest, _other = offers_by_price(fake)
    up = cli("up", "--headless", "--yes", "--until", "leased", "--down-after", env=env)
    assert up.returncode == 0, up.stderr
    assert created_ask_ids(fake)[0] == cheapest["id"]


def test_a_host_that_just_failed_is_rented_only_after_the_others(
    fake: FakeVast, env: dict[str, str], tmp_path: Path
) -> None:
    cheapest, other = offers_by_price(fake)
    remember_failure(tmp_path / "state", cheapest)
    up = cli("up", "--headless", "--yes", "--until", "leased", "--down-after", env=env)
    assert up.returncode == 0, up.stderr
    assert created_ask_ids(fake) == [other["id"]]  # it leased there: the failed host untried
    records = [json.loads(line) for line in up.stdout.splitlines()]
    said = " ".join(
        json.dumps(r["payload"]) for r in records if r.get("event") == "frame"
    )  # the engine's own line on the provider channel says why
    assert f"host {cheapest['machine_id']}" in said and "tried after the others" in said
    assert fake.billing() == []


def test_the_memory_is_off_at_zero_days_and_forgets_after_the_window(
    fake: FakeVast, env: dict[str, str], tmp_path: Path
) -> None:
    cheapest, _other = offers_by_price(fake)
    remember_failure(tmp_path / "state", cheapest)
    # An hour ago is outside 0.01 days (the offers are read first: renting one takes it).
    listed = json.loads(
        cli("offers", "--json", "--avoid-failed-hosts-days", "0.01", env=env).stdout
    )
    assert listed[0]["offer_id"] == str(cheapest["id"])
    assert all(o["recent_failure"] is None for o in listed)
    off = {**env, "MVP_LEASE_AVOID_FAILED_HOSTS_DAYS": "0"}
    up = cli("up", "--headless", "--yes", "--until", "leased", "--down-after", env=off)
    assert up.returncode == 0, up.stderr
    assert created_ask_ids(fake)[0] == cheapest["id"]


def test_offers_json_badges_the_failed_host_and_lists_it_last(
    fake: FakeVast, env: dict[str, str], tmp_path: Path
) -> None:
    cheapest, other = offers_by_price(fake)
    remember_failure(tmp_path / "state", cheapest)
    result = cli("offers", "--json", env=env)
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert [o["offer_id"] for o in listed] == [str(other["id"]), str(cheapest["id"])]
    assert listed[0]["recent_failure"] is None
    assert listed[1]["host"] == str(cheapest["machine_id"])
    assert listed[1]["machine_id"] == str(cheapest["machine_id"])
    assert "at ssh" in listed[1]["recent_failure"] and REASON in listed[1]["recent_failure"]
    table = cli("offers", env=env)
    last = table.stdout.strip().splitlines()[-1]
    assert last.startswith(str(cheapest["id"])) and "failed recently" in last
    assert "1 on a host that failed" in table.stderr


def test_hosts_lists_the_journal_newest_first(
    fake: FakeVast, env: dict[str, str], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    missing = cli("hosts", env=env)
    assert missing.returncode == 2 and "no host journal" in missing.stderr
    assert "Traceback" not in missing.stderr
    cheapest, other = offers_by_price(fake)
    remember_failure(state, cheapest, ago=7200)
    remember_failure(state, other, ago=60)
    with (state / "hosts.jsonl").open("a") as handle:
        handle.write("{torn\n")
    result = cli("hosts", "--json", env=env)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["host"] for r in rows] == [str(other["machine_id"]), str(cheapest["machine_id"])]
    assert rows[0]["stage"] == "ssh" and rows[0]["reason"] == REASON and rows[0]["avoided"]
    assert rows[0]["seconds"] == 151.0 and rows[0]["cost_usd"] == 0.012
    assert "1 line(s)" in result.stderr  # the corrupt line is counted, not fatal
    recent = cli("hosts", "--json", "--days", "0.01", env=env)
    assert [json.loads(line)["host"] for line in recent.stdout.splitlines()] == [
        str(other["machine_id"])
    ]
    assert cli("hosts", "--json", "--provider", "runpod", env=env).stdout == ""
    table = cli("hosts", env=env).stdout.splitlines()
    assert table[0].split()[:5] == ["when", "provider", "host", "gpu", "stage"]
    assert "vastai" in table[1] and f"failed: {REASON} [avoided]" in table[1]


def test_offers_json_says_whether_the_model_fits(
    fake: FakeVast, env: dict[str, str], tmp_path: Path
) -> None:
    """A 30 GB model (a sparse local file) on the fake's 24 GB cards: `no`, with what it
    needs, the same estimate the board shows; a 48 GB card fits."""
    from tests.tui.fit_data import GIB, header_gguf

    fake.add_offer(dph_total=0.90, gpu_name="RTX A6000", gpu_ram=49140)
    model = header_gguf(tmp_path / "big.gguf", size=30 * GIB)
    env = {**env, "MVP_GGUF_LOCAL_PATH": str(model), "MVP_MAX_CONTEXT": "4096",
           "MVP_IMAGE_SIZE_GB": "3.6"}
    result = cli("offers", "--json", env=env)
    assert result.returncode == 0, result.stderr
    by_gpu = {o["gpu_name"]: o for o in json.loads(result.stdout)}
    assert by_gpu["RTX 4090"]["fit"] == "no" and by_gpu["RTX 4090"]["needs_gb"] == 33
    assert by_gpu["RTX A6000"]["fit"] == "fits"
    assert by_gpu["RTX A6000"]["ready"]["pull_s"] > 0
    table = cli("offers", env=env)
    assert "✗ needs 33 GB" in table.stdout
    assert "the model needs 33 GB per node" in table.stderr

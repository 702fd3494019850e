"""A run survives its hosts: the walk goes all the way to a serving engine. Against the fake
Vast API with real sshd nodes, a gauntlet of bad hosts (SSH never answers, the key is
refused, the instance exits during bring-up) ends on the good one; each bad host is
destroyed, confirmed, its reason in the run record, and the one that exits is noticed from
the provider within two polls."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.lease.records import RECORD_FILE
from tests.e2e.headless import HeadlessRun
from tests.e2e.node import Node, vast_node_env
from tests.e2e.test_vast_headless import cli
from tests.fakes.vastai_server import FakeVast
from tests.ssh.sshd import Sshd, free_port, sshd_executable

KEY = "fake-vast-key-0123456789"
POLL_S = 1


@pytest.fixture
async def refusing_sshd(tmp_path: Path) -> AsyncIterator[Sshd]:
    """A host whose sshd answers but trusts another key than ours."""
    sshd = Sshd(sshd_executable(), tmp_path / "sshd-refusing")
    sshd.authorize(asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode())
    await sshd.start()
    try:
        yield sshd
    finally:
        await sshd.stop()


def _silent_listener() -> socket.socket:
    """A port that accepts connections and never says a word (a host that hangs)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


def _record(state: Path) -> dict[str, object]:
    (path,) = state.rglob(RECORD_FILE)
    value: dict[str, object] = json.loads(path.read_text())
    return value


async def test_gauntlet_of_bad_hosts_ends_serving_on_the_good_one(
    node: Node, refusing_sshd: Sshd, tiny_gguf: Path, tmp_path: Path
) -> None:
    hang = _silent_listener()
    with hang, FakeVast(api_key=KEY) as fake:
        unreachable = fake.add_offer(dph_total=0.10)
        refusing = fake.add_offer(dph_total=0.20)
        exiting = fake.add_offer(dph_total=0.30)
        good = fake.add_offer(dph_total=0.40)
        fake.offer_ssh[unreachable] = ("127.0.0.1", free_port(), True)  # nothing listens
        fake.offer_ssh[refusing] = ("127.0.0.1", refusing_sshd.port, True)
        fake.offer_ssh[exiting] = ("127.0.0.1", hang.getsockname()[1], True)
        fake.offer_ssh[good] = ("127.0.0.1", node.sshd.port, True)
        fake.exit_after_running(exiting, 3)
        machines = {int(o["id"]): o["machine_id"] for o in fake.offers()}
        env = {
            **vast_node_env(fake, node, KEY, tmp_path),
            "MVP_VASTAI_POLL_INTERVAL_SECS": str(POLL_S),
            "MVP_SSH_READY_TIMEOUT_SECS": "12",  # the cap of the unreachable host's budget
            "MVP_SSH_CONNECT_TIMEOUT_SECS": "2",
        }
        state = tmp_path / "state"
        offers = [str(o) for o in (unreachable, refusing, exiting, good)]
        args = ["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)]
        args += [x for o in offers for x in ("--offer", o)]
        async with HeadlessRun(args, state, env=env) as run:
            code = await run.finish(within=240)
        assert code == 0, run.stderr
        try:
            (ready,) = run.events("node_ready")
            abandoned = run.events("attempt_abandoned")
            kinds = [a["failure_kind"] for a in abandoned]
            assert kinds == ["ssh_unreachable", "ssh_key_refused", "instance_exited"], abandoned
            assert all(a["scope"] == "host" for a in abandoned)
            assert [a["stage"] for a in abandoned] == ["ssh", "ssh", "ssh"]
            # The three bad hosts are destroyed, confirmed; only the good one bills.
            bad_ids = [a["provider_id"] for a in abandoned]
            live = fake.billing()
            assert len(live) == 1 and str(live[0]["id"]) not in bad_ids
            assert sorted(int(i) for i in bad_ids) == sorted(fake.destroyed())
            deleted = {e["provider_id"] for e in run.events("lease_deleted")}
            assert set(bad_ids) <= deleted
            # Their reasons stay in the run record, with the stage they reached.
            leases = {x["provider_id"]: x for x in _record(state)["leases"]}  # type: ignore[union-attr]
            for pid, kind in zip(bad_ids, kinds, strict=True):
                assert leases[pid]["state"] == "deleted"
                assert kind in leases[pid]["failure"] and "failed at ssh" in leases[pid]["failure"]
            # The instance that exited was noticed from the provider within two polls.
            exiting_id = int(bad_ids[2])
            noticed = abandoned[2]["at"]
            assert noticed - fake.exited_at[exiting_id] <= 2 * POLL_S + 0.5
            # The walk's order was said before it began, and again after each failed host.
            orders = run.events("walk_order_said")
            assert [o.split(":")[1] for o in orders[0]["offers"]] == offers
            assert len(orders) == 4 and orders[-1]["offers"] == [f"vastai:{good}"]
            assert ready["local_url"].startswith("http://127.0.0.1:")
            # The seed's records, per host: each bad one's runtime `failed`, the serving one's
            # `ready`; and no ProvisionFailed, as the run served.
            kinds_seen = [f["payload"]["event"]["kind"]
                          for f in run.frames("mvp.provisioning.events")]
            assert "ProvisionFailed" not in kinds_seen and kinds_seen.count("NodeLive") == 4
            runtime = [f["payload"]["status"] for f in run.frames("mvp.orch.bootstrap")
                       if f["payload"]["phase"] == "node_runtime_ready"]
            assert runtime == ["started", "failed"] * 3 + ["started", "ready"], runtime
        finally:
            down = cli("down", "--all", "--yes", env={**env, "MVP_STATE_DIR": str(state)})
            assert down.returncode == 0, down.stderr
        assert fake.billing() == []
        # Host memory: every attempt is in the journal; the next run, offered the same
        # machines (the failed ones cheapest), rents the one that served first.
        hosts = cli("hosts", "--json", env={**env, "MVP_STATE_DIR": str(state)})
        assert hosts.returncode == 0, hosts.stderr
        journal = [json.loads(line) for line in hosts.stdout.splitlines() if line.strip()]
        assert sorted((j["stage"], j["ok"]) for j in journal) == sorted(
            [("ssh", False)] * 3 + [("serving", True)]
        ), journal
        again = {fake.add_offer(dph_total=0.05 * (i + 1), machine_id=machines[o]): o
                 for i, o in enumerate((unreachable, refusing, exiting, good))}
        async with HeadlessRun(["--yes", "--until", "leased"], state, env=env) as second:
            assert await second.finish(within=120) == 0, second.stderr
        (first,) = second.events("attempt_started")
        assert again[int(first["offer_id"])] == good, "a host that just failed was tried first"
        down = cli("down", "--all", "--yes", env={**env, "MVP_STATE_DIR": str(state)})
        assert down.returncode == 0 and fake.billing() == [], down.stderr

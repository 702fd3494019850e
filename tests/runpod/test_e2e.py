"""The must-show run on RunPod, headless: the fake RunPod over real HTTP rents a "pod" whose
SSH endpoint is a real OpenSSH sshd on loopback; the real engine and node agent serve the tiny
model. The first GPU type is out of capacity, the second's create answers 500 although the
pod exists (adopted, never created twice), the pod reports RUNNING without SSH for a while,
then serves tokens; the first DELETE fails, the teardown still ends confirmed. Nothing is
left billing, no key lands in any file, no request meets Cloudflare, 429s are waited out."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
from pathlib import Path

import asyncssh

from mvp_tui.providers.runpod.client import HOST_KEY_ENV
from tests.agent.procs import alive
from tests.e2e.headless import HeadlessRun, event
from tests.e2e.node import Node
from tests.e2e.test_vast_headless import cli
from tests.fakes.container import wait_until
from tests.fakes.runpod_server import FakeRunPod
from tests.runpod.conftest import assert_contract

A5000, A40, RTX4090 = "NVIDIA RTX A5000", "NVIDIA A40", "NVIDIA GeForce RTX 4090"


def runpod_env(fake: FakeRunPod, node: Node, tmp_path: Path) -> dict[str, str]:
    """The headless run's environment: RunPod at the fake, the node's sshd trusting the
    client key, which sits where the engine looks for it by default (~/.ssh/id_ed25519)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    key = asyncssh.read_private_key(str(node.client_key))
    identity = home / ".ssh" / "id_ed25519"
    key.write_private_key(str(identity))
    identity.chmod(0o600)
    key.write_public_key(str(identity) + ".pub")
    fake.ssh_endpoint = ("127.0.0.1", node.port)
    fake.node_env_file = tmp_path / "container.environ"
    return {
        "HOME": str(home), "MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": fake.api_key,
        "MVP_RUNPOD_API_URL": fake.api_url, "MVP_LEASE_RECONCILE_WAITS_SECS": "0.2,0.5",
        "MVP_RUNPOD_POLL_INTERVAL_SECS": "0.5",
        "MVP_NODE_PYTHON": sys.executable, "MVP_NODE_DIR": str(node.node_dir),
        "MVP_NODE_PROVIDER_ENV_FILE": str(fake.node_env_file),
        "MVP_SSH_RETRY_INITIAL_SECS": "0.2",
        # The boot guard the pod's start command arms, and the agent that stands it down,
        # meet here (never in this machine's /run).
        "MVP_BOOT_GUARD_DIR": str(tmp_path / "guard"),
    }


def catalog(fake: FakeRunPod) -> None:
    fake.add_gpu(A5000, memory=24, secure_price=0.27)
    fake.add_gpu(A40, memory=48, secure_price=0.40)
    fake.add_gpu(RTX4090, memory=24, secure_price=0.69)


def assert_key_only_in_its_secret(fake: FakeRunPod, host_key: str) -> None:
    """The private host key in no request but the secret's create, and there only as its
    `value`; in no answer at all."""
    holders = 0
    for exchange in fake.exchanges:
        body = exchange.request.body
        if exchange.op == "secret_create" and isinstance(body, dict):
            holders += body["value"] == host_key
            body = {k: v for k, v in body.items() if k != "value"}
        assert host_key not in json.dumps(body), exchange.request.path
        assert host_key not in json.dumps(exchange.body), exchange.request.path
    assert holders == 1, "the key was not sent in exactly one secret"


def no_key_in(directory: Path, key: str) -> None:
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert key.encode() not in path.read_bytes(), path


async def test_runpod_walk_adopts_serves_and_tears_down_confirmed(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeRunPod() as fake:
        catalog(fake)
        fake.no_capacity(A5000)
        fake.lose_create_answer(500, gpu=A40)
        fake.running_without_ssh(10**6)  # until the "image" has installed its host key
        fake.fail_delete(None, 1)
        fake.rate_limit("get", 2, retry_after=1)
        env = runpod_env(fake, node, tmp_path)
        args = ["--yes", "--gguf-local-path", str(tiny_gguf), "--prompt", "hello pod",
                "--max-tokens", "12", "--down-after"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            host_key = await boot_pod(run, fake, node)
            code = await run.finish(within=180)
        assert code == 0, run.stderr
        creates = [r.body["gpu"]["id"] for r in fake.create_requests()]
        assert creates == [A5000, A40], "one create per type: the lost answer was not re-sent"
        assert fake.pods() == [] and len(fake.deleted()) == 1
        # One secret per attempt: the refused type's went at once, the served pod's after it.
        assert fake.secrets() == [] and len(fake.deleted_secrets) == 2, "a secret stayed"
        assert_key_only_in_its_secret(fake, host_key)
        (pod_id,) = fake.deleted()
        assert fake.destroyed_by(pod_id) == "account"
        assert len([x for x in fake.answers(500) if x.op == "delete"]) == 1
        assert fake.cloudflare_blocks == 0 and not fake.scope_violations
        limited = [x for x in fake.exchanges if x.status == 429]
        assert len(limited) == 2
        for burst in limited:
            later = [x for x in fake.exchanges if x.op == burst.op and x.at > burst.at]
            assert later and later[0].at - burst.at >= 0.9, "Retry-After was not waited out"
        assert_contract(fake)
        key = fake.api_key
    answers = [(e["outcome"], e["offer_id"]) for e in run.events("attempt_answered")]
    assert answers[0] == ("unavailable", f"SECURE:{A5000}")
    assert answers[1][0] == "ambiguous"
    (reconciled,) = run.events("reconciled")
    assert reconciled["adopted_id"] == pod_id and reconciled["destroyed"] == []
    assert any(e["raw_state"].startswith("RUNNING (no SSH") for e in run.events("lease_pending"))
    pinned = [x["host_key"] for r in (tmp_path / "state").rglob("record.json")
              for x in json.loads(r.read_text())["leases"] if x.get("host_key")]
    assert pinned == [node.sshd.host_key.export_public_key().decode().strip()]
    # Said as it answers the first connect, but pinned before the create (issue 22 item 1).
    pins = run.events("host_key_pinned")
    assert pins and all(p["before_create"] for p in pins), "pinned on first connect"
    (running,) = run.events("lease_running")
    assert running["port"] == node.port and running["via"] == "direct"
    watchdog = run.events("node_watchdog")
    assert watchdog and watchdog[0]["status"] == "ready", watchdog
    (done,) = run.events("prompt_done")
    assert done["tokens_generated"] >= 1
    weights = [f["payload"] for f in run.frames("mvp.worker.weights")]
    assert not alive(weights[0]["engine_pid"])
    (deleted,) = run.events("lease_deleted")
    # The receipt: /billing/pods's figure beside the estimate (the fake bills 1 % of the rate).
    assert deleted["billed_usd"] == round(0.40 * 0.01, 4) and deleted["spend_usd"] >= 0
    assert key not in run.stderr and all(key not in str(r) for r in run.records)
    no_key_in(tmp_path / "state", key)
    no_key_in(node.node_dir, key)
    no_key_in(tmp_path / "state", host_key)
    assert all(host_key not in str(r) for r in run.records) and host_key not in run.stderr


async def boot_pod(run: HeadlessRun, fake: FakeRunPod, node: Node) -> str:
    """What the pod does at start, once RUNNING (still without SSH) was seen: its container
    runs the start command the create sent (providers/runpod/boot.py, the real script), which
    installs the host key (RunPod fills its env's secret reference in as it boots) and the
    user's key and execs sshd; then the endpoint shows. Returns the host key (base64 of the
    private key, as the secret holds it)."""

    def running_without_ssh(record: dict[str, object]) -> bool:
        state = record.get("raw_state")
        return record.get("event") == "lease_pending" and str(state).startswith("RUNNING (no SSH")

    await run.until(running_without_ssh, within=60)
    (pod,) = fake.pods()
    # The create's env holds only the reference; the key reaches the pod through the secret.
    (secret,) = fake.secrets()
    reference = "{{ RUNPOD_SECRET_" + secret["name"] + " }}"
    assert fake.env_of(pod["id"])[HOST_KEY_ENV] == reference
    host_key = fake.container_env(pod["id"])[HOST_KEY_ENV]
    assert host_key != reference and fake.secret_values() == [host_key]
    await start_pod_command(node, fake, pod["id"])
    fake.show_ssh()
    return host_key


async def start_pod_command(node: Node, fake: FakeRunPod, pod_id: str) -> None:
    """The node's sshd, replaced by the pod's own start command run with the pod's env (the
    container's HOME and /etc/ssh moved under the node's sshd dir)."""
    env = fake.container_env(pod_id)
    home = node.sshd.dir / "pod-home"
    boot_env = {
        **env, "PATH": os.environ["PATH"], "HOME": str(home),
        "MVP_BOOT_SSH_DIR": str(node.sshd.dir / "pod-etc-ssh"),
        "MVP_BOOT_SSHD_CONFIG": str(node.sshd.boot_config(home / ".ssh" / "authorized_keys")),
    }
    await node.sshd.stop()
    node.sshd.host_key = asyncssh.import_private_key(base64.b64decode(env[HOST_KEY_ENV]))
    await node.sshd.start(fake.cmd_of(pod_id), boot_env)
    installed = node.sshd.dir / "pod-etc-ssh" / "ssh_host_ed25519_key"
    assert installed.stat().st_mode & 0o077 == 0, "the private host key is readable by others"
    assert any("starting sshd with the pinned host key" in line for line in node.sshd.log)


async def test_runpod_until_ready_then_ls_and_down_all(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeRunPod() as fake:
        catalog(fake)
        fake.running_without_ssh(10**6)  # until the "image" has installed its host key
        env = runpod_env(fake, node, tmp_path)
        offers = cli("offers", "--json", env=env)
        assert offers.returncode == 0, offers.stderr
        assert f'"SECURE:{A5000}"' in offers.stdout
        args = ["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            await boot_pod(run, fake, node)
            code = await run.finish(within=180)
        assert code == 0, run.stderr
        assert len(fake.billing()) == 1
        await run.until(event("node_ready"))
        # The start command armed the boot guard; the agent stood it down when it started.
        (guard,) = run.events("node_boot_guard")
        assert guard["status"] == "armed" and guard["grace_s"] == 20 * 60
        log = tmp_path / "guard" / "log"
        await asyncio.to_thread(wait_until, lambda: "stood down" in log.read_text(), 30, "guard")
        engine_pid = run.frames("mvp.worker.weights")[0]["payload"]["engine_pid"]
        state = {**env, "MVP_STATE_DIR": str(tmp_path / "state")}
        listed = cli("ls", "--json", env=state)
        assert listed.returncode == 0 and fake.pods()[0]["id"] in listed.stdout
        assert len(fake.secrets()) == 1, "the pod lives: its secret stays"
        result = cli("down", "--all", "--yes", env=state)
        assert result.returncode == 0, result.stderr
        assert fake.billing() == [] and fake.cloudflare_blocks == 0
        assert fake.secrets() == [], "down deleted the pod, not its secret"
        assert_contract(fake)
        no_key_in(tmp_path / "state", fake.api_key)
    os.kill(engine_pid, signal.SIGTERM)  # the "pod" is this machine: stop what it left


async def test_a_kept_pod_deletes_itself_with_its_pod_key_at_its_deadline(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    """The node's dead-man's switch on RunPod: RUNPOD_POD_ID / RUNPOD_API_KEY (pod-scoped,
    from the container's env) prove the switch can act, then delete the pod at the deadline;
    the account key never reaches the node."""
    with FakeRunPod() as fake:
        catalog(fake)
        fake.running_without_ssh(10**6)
        env = {**runpod_env(fake, node, tmp_path), "MVP_MAX_HOURS": "0.003"}  # 10.8 s
        args = ["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            await boot_pod(run, fake, node)
            assert await run.finish(within=180) == 0, run.stderr
        (verdict,) = [e for e in run.events("node_watchdog") if e["status"] == "ready"]
        assert verdict["armed"] and verdict["deadline_at"] is not None
        (pod,) = fake.billing()
        assert await asyncio.to_thread(fake.deleted_event.wait, 120), "the pod never deleted itself"
        assert fake.destroyed_by(pod["id"]) == "instance" and fake.billing() == []
        assert fake.scope_violations == [] and fake.cloudflare_blocks == 0
        assert_contract(fake)
        no_key_in(node.node_dir, fake.api_key)
        state = {**env, "MVP_STATE_DIR": str(tmp_path / "state")}
        assert len(fake.secrets()) == 1
        down = await asyncio.to_thread(cli, "down", "--all", "--yes", env=state)
        assert down.returncode == 0, down.stderr
        assert fake.secrets() == [], "the pod is gone: down deletes its secret"


async def test_a_run_killed_before_ssh_answers_leaves_a_pod_that_deletes_itself(
    node: Node, tmp_path: Path
) -> None:
    """The boot guard in the pod's `cmd` (issue 19 item 5): the pod's real start command runs
    (sshd and the guard); the run never sees SSH and is `kill -9`ed; with no agent within the
    grace, the pod deletes itself with its pod-scoped key."""
    grace_s = 10
    with FakeRunPod() as fake:
        catalog(fake)
        fake.running_without_ssh(10**6)  # SSH never shows to the run
        env = {**runpod_env(fake, node, tmp_path), "MVP_BOOT_GRACE_MINS": str(grace_s / 60)}
        async with HeadlessRun(["--yes"], tmp_path / "state", env=env) as run:
            await run.until(event("lease_pending"), within=60)
            (pod,) = fake.pods()
            assert fake.env_of(pod["id"])["MVP_BOOT_GRACE_S"] == str(grace_s)
            await start_pod_command(node, fake, pod["id"])
            verdict = tmp_path / "guard" / "verdict"
            await asyncio.to_thread(wait_until, verdict.exists, 10, "the guard's verdict")
            assert verdict.read_text().strip() == f"armed python3 {grace_s}"
            assert fake.deleted() == [], "the guard fired before the run was killed"
            run.signal(signal.SIGKILL)
            killed = asyncio.get_running_loop().time()
            await run.finish()
        assert await asyncio.to_thread(fake.deleted_event.wait, grace_s + 60), "never deleted"
        took = asyncio.get_running_loop().time() - killed
        assert fake.destroyed_by(pod["id"]) == "instance" and fake.billing() == []
        assert fake.scope_violations == [] and fake.cloudflare_blocks == 0
        assert_contract(fake)
        log = tmp_path / "guard" / "log"
        await asyncio.to_thread(wait_until, lambda: "gone" in log.read_text(), 30, "gone")
        assert "destroy: HTTP 204" in log.read_text()
    assert took <= grace_s + 60


async def test_a_pod_whose_key_may_not_delete_it_gives_up_and_down_ends_it(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    """The recorded real failure (HTTP 403 on a pod key's own DELETE), end to end: the verdict
    says the delete right is unproven and the run warns; at the deadline the switch is
    refused three times, tries podAction terminate and stop once each, then stops asking
    (the pod bills, said) instead of retrying for ever; `down --all` ends it with the
    account key."""
    with FakeRunPod() as fake:
        catalog(fake)
        fake.running_without_ssh(10**6)
        fake.refuse_self_delete = True
        env = {**runpod_env(fake, node, tmp_path), "MVP_MAX_HOURS": "0.003",  # 10.8 s
               "MVP_WATCHDOG_RETRY_INITIAL_S": "0.05"}
        args = ["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            await boot_pod(run, fake, node)
            assert await run.finish(within=180) == 0, run.stderr
        (verdict,) = [e for e in run.events("node_watchdog") if e["status"] == "ready"]
        assert verdict["destroy_proven"] is False
        assert "proved only that its key reads the instance" in run.stderr + json.dumps(
            run.records)
        assert await asyncio.to_thread(fake.wait_refused, 5, 120), fake.refused_self
        (pod,) = fake.billing()
        refused = [(r.method, r.path) for r in fake.refused_self]
        assert refused.count(("DELETE", f"/v2/pods/{pod['id']}")) == 3
        assert refused.count(("POST", f"/v2/pods/{pod['id']}/action")) == 2
        state = {**env, "MVP_STATE_DIR": str(tmp_path / "state")}
        down = await asyncio.to_thread(cli, "down", "--all", "--yes", env=state)
        assert down.returncode == 0, down.stderr
        assert fake.billing() == [] and fake.destroyed_by(pod["id"]) == "account"
        assert len(fake.refused_self) == 5, "the switch kept asking after it gave up"
    logs = "".join(p.read_text(errors="replace") for p in node.node_dir.rglob("*.log"))
    assert "dead-man's switch gave up" in logs and "may still bill" in logs

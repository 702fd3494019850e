"""The boot guard in RunPod's start command (`args`, providers/runpod/boot.py), the real
script run as the pod's container runs it, against the fake RunPod on loopback: it deletes
its own pod with the pod-scoped key when no agent attached in time; a start step that fails
waits for the guard instead of exiting (RunPod restarts an exited container, which would
re-arm the guard for ever while the pod bills)."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

from mvp_tui.node.prefetch import read_prefetch
from mvp_tui.providers.boot_guard import BOOT_GUARD_DIR_ENV, guard_script
from mvp_tui.providers.runpod.boot import HOST_KEY_ENV, pod_command
from mvp_tui.providers.runpod.node_api import GUARD as RUNPOD
from mvp_tui.providers.runpod.secrets import secret_reference
from tests.agent.hub_server import HubServer
from tests.fakes.container import Container, wait_until
from tests.fakes.runpod_server import FakeRunPod
from tests.runpod.conftest import assert_contract


def test_a_failed_start_step_waits_for_the_guard_which_deletes_the_pod(tmp_path: Path) -> None:
    with FakeRunPod() as fake:
        pod = fake.add_pod("mvp-r1-1-1")
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("")  # the host key's directory cannot be made under a file
        env = {
            **fake.instance_env(pod), "MVP_RUNPOD_API_URL": fake.api_url,
            "MVP_BOOT_GRACE_S": "1", HOST_KEY_ENV: "aG9zdC1rZXk=",
            "MVP_BOOT_SSH_DIR": str(blocker / "ssh"), "HOME": str(tmp_path),
        }
        with Container(env, tmp_path / "guard", argv=pod_command()) as node:
            assert node.verdict() == "armed python3 1"
            assert node.proc is not None
            try:
                code = node.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                raise AssertionError("the failed start never ended") from None
            # The start command ended only after its guard had deleted the pod.
            assert code == 1 and fake.destroyed_by(pod) == "instance"
        assert fake.billing() == [] and fake.scope_violations == [] and fake.cloudflare_blocks == 0
        assert "destroy: HTTP 204" in node.log() and "gone" in node.log()
        assert_contract(fake)


def test_an_attached_agent_stands_the_pods_guard_down(tmp_path: Path) -> None:
    with FakeRunPod() as fake:
        pod = fake.add_pod("mvp-r1-1-1")
        env = {**fake.instance_env(pod), "MVP_RUNPOD_API_URL": fake.api_url,
               "MVP_BOOT_GRACE_S": "2", "HOME": str(tmp_path)}
        with Container(env, tmp_path / "guard", script=guard_script(RUNPOD)) as node:
            assert node.verdict() == "armed python3 2"
            node.stand_down()
            node.wait_log("stood down", 10)
            node.wait_ended(10)
        assert fake.deleted() == [] and len(fake.billing()) == 1


def test_a_host_key_reference_runpod_did_not_fill_in_is_said_and_waits_for_the_guard(
    tmp_path: Path,
) -> None:
    """The create's env holds `{{ RUNPOD_SECRET_<name> }}`; a pod that boots with it left as
    written (its secret gone) says so, installs no key and waits for the guard, which deletes
    the pod."""
    with FakeRunPod() as fake:
        pod = fake.add_pod("mvp-r1-1-1")
        env = {
            **fake.instance_env(pod), "MVP_RUNPOD_API_URL": fake.api_url,
            "MVP_BOOT_GRACE_S": "1", HOST_KEY_ENV: secret_reference("mvp_host_key_gone"),
            "MVP_BOOT_SSH_DIR": str(tmp_path / "ssh"), "HOME": str(tmp_path),
            "PATH": os.environ["PATH"], BOOT_GUARD_DIR_ENV: str(tmp_path / "guard"),
        }
        done = subprocess.run(pod_command(), env=env, capture_output=True, timeout=60,
                              check=False)
        assert done.returncode == 1 and fake.destroyed_by(pod) == "instance"
        assert b"RunPod secret was not filled in" in done.stderr
        assert not (tmp_path / "ssh" / "ssh_host_ed25519_key").exists()
        assert fake.billing() == [] and fake.scope_violations == []
        assert_contract(fake)


def test_the_pods_start_command_fetches_the_model_before_sshd(tmp_path: Path) -> None:
    """The prefetch (providers/prefetch.py) runs in RunPod's `cmd` too, under its `set -u`,
    right after the guard: here the start step after it fails (no sshd directory) and the
    model is fetched all the same, into the agent's cache."""
    data = b"GGUF" + bytes(range(256)) * 64
    with FakeRunPod() as fake, HubServer() as hub:
        hub.add_file("mvp-test/tiny-model", "main", "tiny.gguf", data)
        pod = fake.add_pod("mvp-r1-1-1")
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("")
        cache = tmp_path / "cache"
        env = {
            **fake.instance_env(pod), "MVP_RUNPOD_API_URL": fake.api_url,
            "MVP_BOOT_GRACE_S": "600", "MVP_BOOT_SSH_DIR": str(blocker / "ssh"),
            "MVP_PREFETCH": "1", "MVP_GGUF_REPO": "mvp-test/tiny-model",
            "MVP_GGUF_FILE": "tiny.gguf", "MVP_HF_ENDPOINT": hub.url,
            "MVP_MODEL_CACHE_DIR": str(cache),
        }
        part = cache / "mvp-test--tiny-model" / "main" / "tiny.gguf.part"
        with Container(env, tmp_path / "guard", argv=pod_command()):
            wait_until(lambda: part.exists() and part.stat().st_size == len(data), 20, "fetch")
        assert part.read_bytes() == data
        assert read_prefetch(part.with_name("tiny.gguf")) is not None
        (get,) = hub.state.requests
        assert get.path == "/mvp-test/tiny-model/resolve/main/tiny.gguf"


def _session_environs(sid: int) -> dict[int, bytes]:
    """Every live process of session `sid` (a container started in its own): its environ."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[3]) == sid:
                found[int(proc.name)] = (proc / "environ").read_bytes()
        except (OSError, ValueError):
            continue
    return found


def test_the_host_key_is_in_no_environ_once_the_guard_and_prefetch_run(tmp_path: Path) -> None:
    """A process's /proc/<pid>/environ is what it started with, whatever `unset` does later:
    the key is installed and its variable dropped before the shell re-executes itself, so the
    guard and its `sleep` (and the prefetch) never hold it."""
    key = base64.b64encode(b"pinned host key " + os.urandom(24)).decode()
    with FakeRunPod() as fake:
        pod = fake.add_pod("mvp-r1-1-1")
        env = {
            **fake.instance_env(pod), "MVP_RUNPOD_API_URL": fake.api_url,
            "MVP_BOOT_GRACE_S": "600", HOST_KEY_ENV: key, "HOME": str(tmp_path),
            "MVP_BOOT_SSH_DIR": str(tmp_path / "ssh"),
            "MVP_BOOT_SSHD_CONFIG": str(tmp_path / "no-such-sshd-config"),
        }
        with Container(env, tmp_path / "guard", argv=pod_command()) as node:
            assert node.verdict() == "armed python3 600"
            assert node.proc is not None
            wait_until(lambda: len(_session_environs(node.proc.pid)) >= 2, 10, "guard + sleep")
            environs = _session_environs(node.proc.pid)
            assert not [pid for pid, text in environs.items() if key.encode() in text]
            assert not [pid for pid, text in environs.items() if HOST_KEY_ENV.encode() in text]
        installed = tmp_path / "ssh" / "ssh_host_ed25519_key"
        assert installed.read_bytes() == base64.b64decode(key)
        assert installed.stat().st_mode & 0o077 == 0

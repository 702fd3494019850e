"""scripts/dockerd.sh: a private daemon under one dir, no bridge, no forwarding change, and
nothing left (process, mount, dir) once stopped."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.agent.procs import alive
from tests.docker.conftest import DOCKERD_FIX, REPO
from tests.peers import missing_peer

pytestmark = pytest.mark.peer("dockerd")

SCRIPT = str(REPO / "scripts" / "dockerd.sh")


def _mounts_under(path: Path) -> list[str]:
    with open("/proc/mounts") as handle:
        return [line.split()[1] for line in handle if line.split()[1].startswith(f"{path}/")]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if text.encode() in handle.read() and alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_private_dockerd_starts_without_bridge_and_stops_clean() -> None:
    if os.geteuid() != 0 or subprocess.run(["sh", "-c", "command -v dockerd"]).returncode:
        missing_peer("dockerd", "needs root and dockerd", DOCKERD_FIX)
    import docker  # type: ignore[import-untyped]

    forward_before = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    links_before = set(os.listdir("/sys/class/net"))
    # A short path: containerd's socket lives under it (unix socket paths stop at 108 bytes).
    workdir = Path(tempfile.mkdtemp(prefix="mvp-dockerd.", dir="/tmp"))
    started = subprocess.run(
        [SCRIPT, "start", str(workdir)], capture_output=True, text=True, timeout=60, check=False
    )
    try:
        assert started.returncode == 0, started.stderr
        host = f"unix://{workdir}/docker.sock"
        assert f"export MVP_TEST_DOCKER_HOST={host}" in started.stdout
        assert (workdir / "docker_host").read_text().strip() == host
        pid = int((workdir / "dockerd.pid").read_text())
        assert alive(pid)
        client = docker.DockerClient(base_url=host, timeout=30)
        info = client.info()
        assert info["DockerRootDir"] == str(workdir / "data")
        networks = {n.name for n in client.networks.list()}
        assert "bridge" not in networks, networks
        client.close()
        assert set(os.listdir("/sys/class/net")) == links_before  # no docker0
        assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == forward_before
    finally:
        stopped = subprocess.run(
            [SCRIPT, "stop", str(workdir)], capture_output=True, text=True, timeout=60
        )
    assert stopped.returncode == 0, stopped.stderr
    assert not alive(pid)
    assert not _processes_mentioning(str(workdir))  # its containerd went with it
    assert not workdir.exists()
    assert not _mounts_under(workdir)


def test_a_dir_too_long_for_containerd_socket_is_refused_at_once(tmp_path: Path) -> None:
    workdir = tmp_path / ("x" * 80)
    started = subprocess.run(
        [SCRIPT, "start", str(workdir)], capture_output=True, text=True, timeout=60, check=False
    )
    assert started.returncode == 2
    assert "too long" in started.stderr and not started.stdout

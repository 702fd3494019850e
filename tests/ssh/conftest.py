"""Fixtures of the SSH tests: a real sshd on loopback, a client key, and a session harness."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from mvp_tui.events import EngineEvent
from mvp_tui.providers.base import SshEndpoint
from mvp_tui.ssh import (
    HostKeyPins,
    MemoryPins,
    NodeSession,
    SshIdentity,
    SshSettings,
    load_identity,
)
from tests.ssh.sshd import Sshd, sshd_executable, write_key
from tests.ssh.standin_zip import standin_zip

STANDIN = standin_zip()  # the stand-in agent, zipped as the real one is (+ follow/stop)

FAST = SshSettings(
    backoff_initial=0.05,
    backoff_cap=0.2,
    ready_timeout=30.0,
    reconnect_timeout=30.0,
    connect_timeout=5.0,
    banner_timeout=1.0,
    keepalive_interval=5.0,
    shutdown_grace=2.0,
    launch_timeout=10.0,
)


class SshHarness:
    """Collects what a session reports, and waits on it without sleeping."""

    def __init__(self, sshd: Sshd, identity: SshIdentity, remote_dir: Path) -> None:
        self.sshd = sshd
        self.identity = identity
        self.remote_dir = remote_dir
        self.pins: HostKeyPins = MemoryPins()
        self.events: list[EngineEvent] = []
        self.lines: list[tuple[str, bytes]] = []
        self.provider_lines: list[str] = []
        self._changed = asyncio.Event()

    @property
    def endpoint(self) -> SshEndpoint:
        return SshEndpoint(host="127.0.0.1", port=self.sshd.port, user="root", via="direct")

    def session(self, settings: SshSettings = FAST, **kwargs: Any) -> NodeSession:
        kwargs.setdefault("endpoint", self.endpoint)
        kwargs.setdefault("identity", self.identity)
        return NodeSession(
            pins=self.pins,
            lease_key="vastai:7002",
            settings=settings,
            sink=self._event,
            on_node_line=self._line,
            on_provider_line=self._provider_line,
            **kwargs,
        )

    def of(self, cls: type[EngineEvent]) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]

    def stdout(self) -> list[str]:
        return [line.decode() for kind, line in self.lines if kind == "stdout"]

    def agent_records(self) -> list[dict[str, Any]]:
        """The payloads of the node agent's own records (its `mvp.node.1.agent` frames) among
        the stdout lines so far; other lines are skipped."""
        found = []
        for line in self.stdout():
            try:
                frame = json.loads(line)
            except ValueError:
                continue
            if isinstance(frame, dict) and frame.get("channel") == "mvp.node.1.agent":
                found.append(frame["payload"])
        return found

    def stderr(self) -> list[str]:
        return [line.decode() for kind, line in self.lines if kind == "stderr"]

    async def wait_for(self, condition: Callable[[], bool], within: float = 15.0) -> None:
        async with asyncio.timeout(within):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    def _event(self, event: EngineEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def _line(self, kind: str, line: bytes) -> None:
        self.lines.append((kind, line))
        self._changed.set()

    def _provider_line(self, text: str) -> None:
        self.provider_lines.append(text)
        self._changed.set()


@pytest.fixture
def sshd_exe() -> str:
    return sshd_executable()


@pytest.fixture
def client_key(tmp_path: Path) -> Path:
    return write_key(tmp_path / "id_ed25519", asyncssh.generate_private_key("ssh-ed25519"))


@pytest.fixture
async def identity(client_key: Path) -> SshIdentity:
    return await load_identity(client_key, use_env_agent=False)


@pytest.fixture
async def stopped_sshd(sshd_exe: str, tmp_path: Path, identity: SshIdentity) -> AsyncIterator[Sshd]:
    """An sshd that trusts the client key, not yet started."""
    sshd = Sshd(sshd_exe, tmp_path / "sshd")
    sshd.authorize(identity.public_openssh)
    try:
        yield sshd
    finally:
        await sshd.stop()


@pytest.fixture
async def sshd(stopped_sshd: Sshd) -> Sshd:
    await stopped_sshd.start()
    return stopped_sshd


@pytest.fixture
def harness(stopped_sshd: Sshd, identity: SshIdentity, tmp_path: Path) -> SshHarness:
    return SshHarness(stopped_sshd, identity, tmp_path / "node" / "run-1")

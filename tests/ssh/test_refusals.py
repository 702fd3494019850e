"""Attempts that must not retry forever: refused logins, and a local client failing a live sshd.

The banner probe tells "our side is broken" (sshd answers SSH-2.0-, our handshake fails twice
in a row: stop, no other node would do better) from "the node is slow" (keep waiting).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.providers.base import SshEndpoint
from mvp_tui.ssh import (
    AttemptOutcome,
    AuthFailed,
    BootstrapTimedOut,
    ImageUnfit,
    LocalSshProblem,
    SessionStopped,
    SshAttempt,
    StopReason,
    load_identity,
)
from mvp_tui.ssh.banner import ssh_banner, strikes_after
from tests.ssh.conftest import FAST, STANDIN, SshHarness
from tests.ssh.sshd import Sshd, write_key

BANNER = b"SSH-2.0-OpenSSH_9.6\r\n"


async def test_a_wrong_user_is_an_auth_error_after_bounded_attempts(
    sshd: Sshd, harness: SshHarness
) -> None:
    endpoint = SshEndpoint(host="127.0.0.1", port=sshd.port, user="no-such-user", via="direct")
    session = harness.session(endpoint=endpoint)
    with pytest.raises(AuthFailed) as refused:
        await session.start_agent(STANDIN, {}, str(harness.remote_dir))
    text = str(refused.value)
    assert f"no-such-user@127.0.0.1:{sshd.port}" in text
    assert harness.identity.fingerprint in text
    assert "[vastai] ssh_user" in refused.value.fix and "no-such-user" in refused.value.fix
    outcomes = [a.outcome for a in harness.of(SshAttempt)]
    assert outcomes == [AttemptOutcome.AUTH_FAILED] * FAST.auth_attempts
    assert [s.reason for s in harness.of(SessionStopped)] == [StopReason.AUTH_FAILED]
    await session.close()


async def test_a_key_the_node_does_not_hold_is_an_auth_error(
    sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    other = write_key(tmp_path / "other_key", asyncssh.generate_private_key("ssh-ed25519"))
    stranger = await load_identity(other, use_env_agent=False)
    session = harness.session(dataclasses.replace(FAST, auth_attempts=2), identity=stranger)
    with pytest.raises(AuthFailed, match=stranger.fingerprint.replace("+", r"\+")):
        await session.start_agent(STANDIN, {}, str(harness.remote_dir))
    assert len(harness.of(SshAttempt)) == 2
    await session.close()


def image_without_python(tmp_path: Path) -> str:
    """A session environment with every tool of this machine but Python on PATH, and a HOME
    whose shell rc does not add this machine's Python back."""
    bin_dir = tmp_path / "image-bin"
    bin_dir.mkdir()
    for tool in Path("/usr/bin").iterdir():
        if not tool.name.startswith("python"):
            (bin_dir / tool.name).symlink_to(tool)
    home = tmp_path / "image-home"
    home.mkdir()
    return f"PATH={bin_dir} HOME={home}"


async def test_an_image_without_python3_stops_at_once_naming_it(
    stopped_sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    """No retry can help an image that lacks python3: one attempt, and the error says so."""
    stopped_sshd.options = ["-o", f"SetEnv={image_without_python(tmp_path)}"]
    await stopped_sshd.start()
    session = harness.session()
    with pytest.raises(ImageUnfit) as unfit:
        await session.start_agent(STANDIN, {}, str(harness.remote_dir))
    assert "lacks python3" in str(unfit.value) and "[image] node" in unfit.value.fix
    outcomes = [a.outcome for a in harness.of(SshAttempt)]
    assert outcomes == [AttemptOutcome.CONNECTED, AttemptOutcome.IMAGE_UNFIT]  # no retry
    assert [s.reason for s in harness.of(SessionStopped)] == [StopReason.IMAGE_UNFIT]
    await session.close()


def kexinit_without_common_algorithms() -> bytes:
    """A server KEXINIT offering only algorithms no client knows."""

    def names(*items: str) -> bytes:
        text = ",".join(items).encode()
        return struct.pack(">I", len(text)) + text

    payload = (
        bytes([20])
        + os.urandom(16)
        + names("no-such-kex@example.com")
        + names("no-such-hostkey@example.com")
        + names("no-such-cipher@example.com") * 2
        + names("no-such-mac@example.com") * 2
        + names("none") * 2
        + names() * 2
        + b"\x00"
        + struct.pack(">I", 0)
    )
    padding = 8 - (len(payload) + 5) % 8
    padding += 8 if padding < 4 else 0
    return struct.pack(">IB", len(payload) + padding + 1, padding) + payload + b"\x00" * padding


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def fake_node(handler: Handler) -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 standing in for a node's sshd; yields its port."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def banner_then_bad_kexinit(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    writer.write(BANNER + kexinit_without_common_algorithms())
    await writer.drain()
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        # Until the client gives up (EOF): one read returns with the client's own banner,
        # and closing then let the client see a dropped connection, not the failed kex.
        while await reader.read(65536):
            pass


async def banner_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(BANNER)
    await writer.drain()


async def test_a_local_failure_against_a_live_sshd_stops_after_two_strikes(
    harness: SshHarness,
) -> None:
    async with fake_node(banner_then_bad_kexinit) as port:
        endpoint = SshEndpoint(host="127.0.0.1", port=port, user="root", via="direct")
        session = harness.session(endpoint=endpoint)
        with pytest.raises(LocalSshProblem) as local:
            await session.start_agent(STANDIN, {}, str(harness.remote_dir))
        await session.close()
    assert "no other node would do better" in str(local.value)
    assert [a.outcome for a in harness.of(SshAttempt)] == [AttemptOutcome.LOCAL_FAILURE] * 2
    stopped = harness.of(SessionStopped)
    assert [s.reason for s in stopped] == [StopReason.LOCAL_PROBLEM]
    # Verdicts are one line of printable ASCII.
    for text in [stopped[0].detail, *harness.provider_lines]:
        assert text.isascii() and text.isprintable() and "\n" not in text


async def test_a_node_dropping_the_handshake_keeps_the_wait_until_the_timeout(
    harness: SshHarness,
) -> None:
    async with fake_node(banner_then_close) as port:
        endpoint = SshEndpoint(host="127.0.0.1", port=port, user="root", via="direct")
        settings = dataclasses.replace(FAST, ready_timeout=1.0, backoff_cap=0.1)
        session = harness.session(settings, endpoint=endpoint)
        with pytest.raises(BootstrapTimedOut) as timed_out:
            await session.start_agent(STANDIN, {}, str(harness.remote_dir))
        await session.close()
    outcomes = {a.outcome for a in harness.of(SshAttempt)}
    assert outcomes == {AttemptOutcome.DROPPED}
    assert len(harness.of(SshAttempt)) > FAST.local_strikes
    assert "not ready within 1s" in str(timed_out.value)


async def test_the_banner_probe_tells_an_sshd_from_anything_else() -> None:
    async def answer(data: bytes) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(data)
            await writer.drain()
            with contextlib.suppress(OSError):
                await reader.read(1)

        return handler

    async with fake_node(await answer(BANNER)) as port:
        assert await ssh_banner("127.0.0.1", port, 1.0)
    async with fake_node(await answer(b"HTTP/1.1 400 Bad Request\r\n")) as port:
        assert not await ssh_banner("127.0.0.1", port, 1.0)
    async with fake_node(await answer(b"")) as port:  # silent until the timeout
        assert not await ssh_banner("127.0.0.1", port, 0.2)
    async with fake_node(await answer(b"")) as port:
        pass
    assert not await ssh_banner("127.0.0.1", port, 1.0)  # nothing listening any more


def test_only_a_banner_with_a_local_failure_is_a_strike() -> None:
    assert strikes_after(0, banner=True, local_failure=True) == 1
    assert strikes_after(1, banner=True, local_failure=True) == 2
    # No banner yet, or another kind of failure: keep waiting from scratch.
    assert strikes_after(1, banner=False, local_failure=True) == 0
    assert strikes_after(1, banner=True, local_failure=False) == 0
    assert strikes_after(0, banner=False, local_failure=False) == 0

"""The multi-node tunnel key's authorized_keys line on a worker (security read L7), against a
real sshd on loopback: it forwards to the worker's RPC port and nowhere else, listens on no
port (-R refused), runs nothing; an earlier run's tunnel lines are swept when a worker
authorizes its own, and a person's own keys are left as they were."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.node.roles import edit_authorized_keys, is_tunnel_line, tunnel_line
from tests.ssh.sshd import Sshd, free_port

PERSON = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPersonsOwnKey me@laptop"


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    """A loopback service standing in for the worker's RPC port."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


async def test_the_tunnel_key_reaches_the_rpc_port_only_and_listens_nowhere(
    sshd_exe: str, tmp_path: Path, echo: int
) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    sshd = Sshd(sshd_exe, tmp_path / "worker-sshd")
    sshd.authorized.write_text(tunnel_line(echo, key.export_public_key().decode(), "r-1") + "\n")
    await sshd.start()
    try:
        async with asyncssh.connect("127.0.0.1", sshd.port, username="root",
                                    client_keys=[key], known_hosts=None) as conn:
            reader, writer = await conn.open_connection("127.0.0.1", echo)
            writer.write(b"ping\n")
            assert await asyncio.wait_for(reader.readline(), 10) == b"ping\n"
            writer.close()
            with pytest.raises(asyncssh.ChannelOpenError):
                await conn.open_connection("127.0.0.1", free_port())  # any other port
            for host in ("127.0.0.1", "", "0.0.0.0"):
                with pytest.raises(asyncssh.ChannelListenError):
                    await conn.forward_remote_port(host, 0, "127.0.0.1", echo)
            with pytest.raises(asyncssh.ChannelListenError):
                await conn.forward_remote_port("127.0.0.1", free_port(), "127.0.0.1", echo)
            done = await asyncio.wait_for(conn.run("echo ran", check=False), 10)
            assert "ran" not in str(done.stdout)
    finally:
        await sshd.stop()


def test_stale_tunnel_lines_are_swept_and_a_persons_keys_stay(tmp_path: Path) -> None:
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIThisRunsTunnelKey"
    old_shape = ('restrict,port-forwarding,permitopen="127.0.0.1:41234",command="/bin/false" '
                 "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOldWorkerKey mvp@dashboard")
    other_run = tunnel_line(40001, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherRun", "r-old")
    path = tmp_path / "authorized_keys"
    path.write_text(f"{PERSON}\n{old_shape}\n{other_run}\n")
    line = tunnel_line(40002, key, "r-new")
    edit_authorized_keys(path, add=line, sweep=is_tunnel_line)
    assert path.read_text() == f"{PERSON}\n{line}\n"
    assert path.stat().st_mode & 0o777 == 0o600
    edit_authorized_keys(path, remove=line)  # the worker's own stop
    assert path.read_text() == f"{PERSON}\n"
    # Only lines of the worker's own shape count as tunnel lines.
    assert not is_tunnel_line(PERSON)
    elsewhere = 'restrict,port-forwarding,permitopen="198.51.100.1:22",command="/bin/false" '
    assert not is_tunnel_line(elsewhere + "ssh-ed25519 AAAAC3Nz")

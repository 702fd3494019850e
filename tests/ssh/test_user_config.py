"""The user's OpenSSH config reaches the node as the seed's `ssh` would (seed 000 ran the
system ssh): a host reachable only through a ProxyCommand is reached through it, with our own
key and pin; `/dev/null` reads none."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from mvp_tui.providers.base import SshEndpoint
from mvp_tui.ssh import BootstrapTimedOut, MemoryPins, SshIdentity
from mvp_tui.ssh.connect import ConnectFailed, open_connection
from mvp_tui.ssh.user_config import proxied
from tests.ssh.conftest import FAST, STANDIN, SshHarness
from tests.ssh.sshd import Sshd

# A ProxyCommand: its stdin and stdout carry the SSH stream to 127.0.0.1:<port>.
RELAY = """
import os, socket, sys, threading
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def up():
    while True:
        data = os.read(0, 65536)
        if not data:
            sock.shutdown(socket.SHUT_WR)
            return
        sock.sendall(data)
threading.Thread(target=up, daemon=True).start()
while True:
    data = sock.recv(65536)
    if not data:
        break
    os.write(1, data)
"""


async def test_a_node_behind_a_proxy_command_is_reached_through_it(
    sshd: Sshd, identity: SshIdentity, tmp_path: Path
) -> None:
    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host node.invalid\n  ProxyCommand {sys.executable} {relay} {sshd.port}\n"
        "  User someone-else\n  Port 2\n"  # ours win: the user and port mvp-tui was given
    )
    # A name that resolves nowhere, on a port where nothing listens: only the proxy gets there.
    endpoint = SshEndpoint(host="node.invalid", port=1, user="root", via="direct")
    settings = dataclasses.replace(FAST, config_file=config)
    assert proxied(config, endpoint.host, endpoint.port, endpoint.user)
    conn, check = await open_connection(endpoint, identity, MemoryPins(), "vastai:1", settings)
    try:
        result = await conn.run("echo via-proxy", check=True)
        assert str(result.stdout).strip() == "via-proxy"
        assert check.pinned_now and check.seen, "its host key pinned, as on any first contact"
    finally:
        conn.close()
    without = dataclasses.replace(FAST, config_file=Path("/dev/null"))
    assert not proxied(Path("/dev/null"), endpoint.host, endpoint.port, endpoint.user)
    with pytest.raises(ConnectFailed):
        await open_connection(endpoint, identity, MemoryPins(), "vastai:1", without)


async def test_a_proxied_node_is_backed_off_from_not_banner_probed(
    harness: SshHarness, tmp_path: Path
) -> None:
    # Its proxy reaches nothing yet: the port cannot be probed from here, so the session
    # backs off between logins (the seed's ssh) instead of probing a banner it cannot see.
    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    config = tmp_path / "ssh_config"
    config.write_text(f"Host node.invalid\n  ProxyCommand {sys.executable} {relay} 1\n")
    endpoint = SshEndpoint(host="node.invalid", port=22, user="root", via="direct")
    settings = dataclasses.replace(FAST, config_file=config, ready_timeout=1.5)
    session = harness.session(settings, endpoint=endpoint)
    with pytest.raises(BootstrapTimedOut):
        await session.start_agent(STANDIN, {}, str(harness.remote_dir))
    await session.close()
    lines = harness.provider_lines
    assert any("retrying in" in line for line in lines), lines
    assert not any("waiting for sshd" in line for line in lines), lines

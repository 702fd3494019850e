"""Local ports carried over SSH to the node's loopback ports, kept across reconnects.

The first bind picks a free 127.0.0.1 port (or takes the one asked for); after a reconnect
the same local port is bound again on the new connection, so a client configured with it
keeps working. asyncssh closes a forward's listener when its connection drops.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncssh

LOOPBACK = "127.0.0.1"


@dataclass(slots=True)
class Forward:
    """127.0.0.1:local_port on this machine to 127.0.0.1:remote_port on the node."""

    remote_port: int
    local_port: int = 0  # 0 until first bound
    listener: asyncssh.SSHListener | None = None
    conn: asyncssh.SSHClientConnection | None = None  # the connection it is bound on


class PortForwards:
    """Every forward of one node session."""

    def __init__(self) -> None:
        self._forwards: list[Forward] = []

    @property
    def all(self) -> list[Forward]:
        return list(self._forwards)

    def add(self, remote_port: int, local_port: int = 0) -> Forward:
        if not 0 < remote_port < 65536:
            raise ValueError(f"remote port {remote_port} is not a TCP port (1-65535)")
        if not 0 <= local_port < 65536:
            raise ValueError(f"local port {local_port} is not a TCP port (0-65535, 0 = pick)")
        forward = Forward(remote_port=remote_port, local_port=local_port)
        self._forwards.append(forward)
        return forward

    async def bind(self, conn: asyncssh.SSHClientConnection, forward: Forward) -> int:
        """Listen for `forward` on `conn` (same local port as before); the local port."""
        self.unbind(forward)
        listener = await conn.forward_local_port(
            LOOPBACK, forward.local_port, LOOPBACK, forward.remote_port
        )
        forward.listener = listener
        forward.conn = conn
        forward.local_port = listener.get_port()
        return forward.local_port

    def unbind(self, forward: Forward) -> None:
        if forward.listener is not None:
            forward.listener.close()
        forward.listener = None
        forward.conn = None

    def remove(self, forward: Forward) -> None:
        self.unbind(forward)
        self._forwards.remove(forward)

    async def close(self) -> None:
        for forward in self._forwards:
            listener, forward.listener, forward.conn = forward.listener, None, None
            if listener is not None:
                listener.close()
                await listener.wait_closed()

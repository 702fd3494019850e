"""Port forwards through a real sshd, kept across reconnects; teardown in every state."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator

import httpx
import pytest

from mvp_tui.providers.base import SshEndpoint
from mvp_tui.ssh import AgentStop, AttemptOutcome, PortForwarded, SessionClosed, SshAttempt
from tests.ssh.conftest import FAST, STANDIN, SshHarness
from tests.ssh.sshd import Sshd, free_port, processes_in, running


@contextlib.asynccontextmanager
async def http_node_service() -> AsyncIterator[int]:
    """A small HTTP server on 127.0.0.1 standing in for the node's inference endpoint."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        path = request.split(b" ")[1]
        body = b'{"pong": "' + path + b'"}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def get(port: int, path: str) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False) as client:
        return await client.get(f"http://127.0.0.1:{port}{path}", timeout=5)


async def test_the_forward_carries_http_and_keeps_its_port_across_a_reconnect(
    sshd: Sshd, harness: SshHarness
) -> None:
    async with http_node_service() as service_port:
        session = harness.session()
        await session.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
        await harness.wait_for(lambda: "ready" in harness.stdout())
        session.ready.set()
        local = await session.forward(service_port)
        assert local != service_port
        response = await get(local, "/v1/models")
        assert response.status_code == 200 and response.json() == {"pong": "/v1/models"}

        await sshd.crash()
        await harness.wait_for(
            lambda: any(a.outcome is AttemptOutcome.DROPPED for a in harness.of(SshAttempt))
        )
        await sshd.start()
        await harness.wait_for(lambda: len(harness.of(PortForwarded)) >= 2)
        assert {e.local_port for e in harness.of(PortForwarded)} == {local}
        response = await get(local, "/after-reconnect")
        assert response.json() == {"pong": "/after-reconnect"}

        assert await session.close() is AgentStop.SHUTDOWN
        with pytest.raises(httpx.ConnectError):
            await get(local, "/closed")  # the forward is gone with the session


async def test_a_chosen_local_port_is_used(sshd: Sshd, harness: SshHarness) -> None:
    async with http_node_service() as service_port:
        session = harness.session()
        await session.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
        wanted = free_port()
        assert await session.forward(service_port, wanted) == wanted
        assert (await get(wanted, "/x")).status_code == 200
        await session.close()


async def test_close_while_waiting_for_sshd_leaves_no_task(
    stopped_sshd: Sshd, harness: SshHarness
) -> None:
    before = asyncio.all_tasks()
    session = harness.session(dataclasses.replace(FAST, backoff_initial=30.0, backoff_cap=30.0))
    start = asyncio.create_task(session.start_agent(STANDIN, {}, str(harness.remote_dir)))
    await harness.wait_for(lambda: len(harness.of(SshAttempt)) >= 1)  # now in its 30 s back-off
    assert await session.close() is AgentStop.NOT_STARTED
    with pytest.raises(Exception, match="ended: closed"):
        await start
    assert asyncio.all_tasks() - before == set()
    assert [c.agent for c in harness.of(SessionClosed)] == [AgentStop.NOT_STARTED]


async def test_close_in_the_middle_of_a_handshake_leaves_no_task(harness: SshHarness) -> None:
    """The node accepts TCP but never answers: close() must not wait for the connect timeout."""
    accepted = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        with contextlib.suppress(OSError):
            await reader.read()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    before = asyncio.all_tasks()
    try:
        endpoint = SshEndpoint(host="127.0.0.1", port=port, user="root", via="direct")
        patient = dataclasses.replace(FAST, connect_timeout=60.0)
        session = harness.session(patient, endpoint=endpoint)
        start = asyncio.create_task(session.start_agent(STANDIN, {}, str(harness.remote_dir)))
        await asyncio.wait_for(accepted.wait(), 10)
        assert await asyncio.wait_for(session.close(), 5) is AgentStop.NOT_STARTED
        with contextlib.suppress(Exception):
            await start
        assert asyncio.all_tasks() - before == set()
    finally:
        server.close()
        await server.wait_closed()


async def test_close_while_the_node_is_unreachable_reports_it_and_the_agent_survives(
    sshd: Sshd, harness: SshHarness
) -> None:
    session = harness.session(dataclasses.replace(FAST, connect_timeout=2.0))
    pid = await session.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
    await harness.wait_for(lambda: "ready" in harness.stdout())
    await sshd.crash()
    before = asyncio.all_tasks()
    # Destroying the lease stops what runs there; the session says it could not.
    assert await session.close() is AgentStop.UNREACHABLE
    assert asyncio.all_tasks() - before == set()
    assert running(pid)
    # Clean up the stand-in "node" by hand (a real destroy would).
    await sshd.start()
    cleanup = harness.session()
    await cleanup.start_agent(STANDIN, {}, str(harness.remote_dir), resume=session.positions)
    assert await cleanup.close() is AgentStop.SHUTDOWN
    assert not running(pid) and processes_in(harness.remote_dir) == []

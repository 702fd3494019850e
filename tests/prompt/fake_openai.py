"""A scripted HTTP server on loopback for shapes the real engine here does not produce.

Each accepted request gets the next canned raw response (status line, headers, body chunks);
the request's headers and JSON body are kept for assertions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Canned:
    status: int
    body: list[bytes]
    content_type: str = "text/event-stream"
    complete: bool = True  # False: drop the connection mid-body (no final chunk)


@dataclass
class FakeOpenAI:
    responses: list[Canned]
    requests: list[tuple[dict[str, str], Any]] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")[1:]
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines if ln)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append((headers, json.loads(body) if body else None))
        canned = self.responses.pop(0)
        writer.write(
            f"HTTP/1.1 {canned.status} X\r\ncontent-type: {canned.content_type}\r\n"
            "transfer-encoding: chunked\r\nconnection: close\r\n\r\n".encode()
        )
        for part in canned.body:
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            await writer.drain()
        if canned.complete:
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()


def sse(*chunks: dict[str, Any] | str) -> list[bytes]:
    """SSE `data:` events for JSON chunks (or raw strings such as "[DONE]")."""
    return [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n".encode() for c in chunks]


@asynccontextmanager
async def fake_openai(*responses: Canned) -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI(list(responses))
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    fake.base_url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        server.close()
        await server.wait_closed()

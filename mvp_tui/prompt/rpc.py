"""The seed's prompt RPC: JSON lines over TCP on loopback, through the pane's own queue.

A client writes one `SubmitPrompt` line, `{"request_id": 1, "prompt_text": "…",
"max_tokens": 64, "token": "…"}` (max_tokens 0 or absent → the configured default), and reads
`text_delta` lines then one `done` or `fault` line, all tagged with its `request_id`; it may
then send the next request on the same connection. A line that does not parse gets a `fault`
line naming the problem and the connection is closed (the orchestrator seed's RPC closes it
without a line).

`token` is this app's addition to the seed's request: the run's RPC token (in the run's
endpoint record, mode 600; `mvp-tui endpoint` prints it), compared in constant time. Without
it every local user could prompt the node through this process, which adds the run's key. A
line without the right token gets one `fault` line and the connection closes. The token
travels in clear text, so the RPC binds to a loopback address unless the user explicitly
acknowledges otherwise (`--rpc-bind-unauthenticated`, `[prompt] rpc_allow_remote = true`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import os
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from mvp_tui.config.defaults import DEFAULT_RPC_ADDR as DEFAULT_RPC_ADDR  # the key's default
from mvp_tui.config.sections.prompt import PromptSection
from mvp_tui.config.spec import specs_of
from mvp_tui.errors import UserError
from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.prompt.events import (
    PromptCancelled,
    PromptDone,
    PromptFault,
    PromptRpcFailed,
    PromptRpcListening,
    PromptSource,
    TextDelta,
    is_end,
)
from mvp_tui.prompt.queue import PromptQueue

DEFAULT_MAX_TOKENS = PromptSection.max_tokens
MAX_LINE_BYTES = 1 << 20
# Before a connection shows the token it costs the dashboard a descriptor and a buffer: its
# first line must come within this, and only so many such connections are held at once (at
# the cap the one waiting longest is closed for the newcomer: a real client sends its line at
# once). A connection that showed the token is the token holder's and no longer counts.
RPC_FIRST_LINE_S = 10.0
RPC_MAX_UNPROVEN = 16
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
REQUEST_EXAMPLE = (
    '{"request_id": 1, "prompt_text": "hello", "max_tokens": 64, "token": "<the RPC token>"}'
)
TOKEN_FIX = (
    'add "token": "<the run\'s RPC token>" to each request line; `mvp-tui endpoint --env` '
    "prints it (MVP_PROMPT_RPC_TOKEN)"
)


class RpcAddrError(UserError, ValueError):
    """`[prompt] rpc_addr` is malformed, not a loopback address, or taken: worded for the
    user, with the fix (never an "unexpected" error)."""


class RpcRequestError(ValueError):
    """A request line that is not a valid `SubmitPrompt`; `request_id` when it was readable."""

    def __init__(self, message: str, request_id: int = 0) -> None:
        super().__init__(message)
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class RpcAddr:
    """Where the RPC listens; port 0 picks a free one (tests)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class SubmitPrompt:
    """One request, as the seed's `SubmitPrompt` (max_tokens 0 means "the default")."""

    request_id: int
    prompt_text: str
    max_tokens: int

    def with_defaults(self, max_tokens: int) -> SubmitPrompt:
        return (
            self if self.max_tokens else SubmitPrompt(self.request_id, self.prompt_text, max_tokens)
        )


def parse_rpc_addr(
    value: str, source: str = "[prompt] rpc_addr", *, allow_remote: bool = False
) -> RpcAddr:
    """`host:port` (IPv6 as `[::1]:port`), or an error naming `source` and the fix. Loopback
    only, unless the user acknowledged (`allow_remote`) that its token travels in clear text."""
    fix = f"set {source} to a loopback address such as {DEFAULT_RPC_ADDR}"
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not host:
        raise RpcAddrError(f"invalid {source} {value!r}: expected host:port", fix=fix)
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise RpcAddrError(
            f"invalid {source} {value!r}: port {port_text!r} is not a number", fix=fix
        ) from None
    if not 0 <= port <= 65535:
        raise RpcAddrError(f"invalid {source} {value!r}: port {port} is out of range", fix=fix)
    if host == "localhost":
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise RpcAddrError(
            f"invalid {source} {value!r}: {host!r} is not an IP address", fix=fix
        ) from None
    if not address.is_loopback and not allow_remote:
        raise RpcAddrError(
            f"refusing {source} {value!r}: the prompt RPC has no authentication of the "
            "network (its token travels in clear text), so it only binds to loopback",
            fix=f"{fix} (reach it from elsewhere through an SSH tunnel), or acknowledge with "
            "--rpc-bind-unauthenticated ([prompt] rpc_allow_remote = true)",
        )
    return RpcAddr(str(address), port)


def bind_failed(addr: RpcAddr, error: OSError) -> RpcAddrError:
    """The RPC cannot listen on `addr` (a port another process holds): what, and the fix."""
    (spec,) = [k for k in specs_of(PromptSection) if k.name == "rpc_addr"]
    why = os.strerror(error.errno) if error.errno else str(error)  # not asyncio's long wording
    return RpcAddrError(
        f"cannot bind the prompt RPC to {addr}: {why}",
        fix=f"free the port (another run may serve there: `mvp-tui endpoint` says), or choose "
        f"another loopback port with {spec.flag} 127.0.0.1:PORT (env {spec.env[0]}, "
        f"{spec.label} in the config file)",
    )


def parse_submit_prompt(line: bytes, token: str | None = None) -> SubmitPrompt:
    """Read one request line, or raise `RpcRequestError` saying what is wrong with it. With
    `token`, the line must carry it (checked before anything else of the request is)."""
    expected = f"expected one JSON line like {REQUEST_EXAMPLE}"
    try:
        body = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise RpcRequestError(
            f"parse prompt request: invalid JSON ({reason}); {expected}"
        ) from None
    if not isinstance(body, dict):
        raise RpcRequestError(f"parse prompt request: not a JSON object; {expected}")
    given = body.get("token")
    if token is not None and not (
        isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())
    ):
        why = "no token" if given is None else "a wrong token"
        raise RpcRequestError(f"prompt RPC refused the request: {why}; fix: {TOKEN_FIX}")
    request_id = body.get("request_id")
    if not _is_int(request_id, U64_MAX):
        raise RpcRequestError(
            f"parse prompt request: request_id must be an integer 0..2^64-1, "
            f"got {_show(request_id)}; {expected}"
        )
    assert isinstance(request_id, int)
    prompt_text = body.get("prompt_text")
    if not isinstance(prompt_text, str):
        raise RpcRequestError(
            f"parse prompt request: prompt_text must be a string, got {_show(prompt_text)}; "
            f"{expected}",
            request_id,
        )
    max_tokens = body.get("max_tokens", 0)
    if not _is_int(max_tokens, U32_MAX):
        raise RpcRequestError(
            f"parse prompt request: max_tokens must be an integer 0..2^32-1 (0 = default), "
            f"got {_show(max_tokens)}; {expected}",
            request_id,
        )
    assert isinstance(max_tokens, int)
    return SubmitPrompt(request_id, prompt_text, max_tokens)


def _is_int(value: Any, maximum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum


def _show(value: Any) -> str:
    return "nothing" if value is None else json.dumps(value)[:40]


def rpc_line(event: EngineEvent, request_id: int) -> dict[str, Any] | None:
    """The seed's JSON line for a queue event, or None for events the RPC does not send."""
    if isinstance(event, TextDelta):
        return {"type": "text_delta", "request_id": request_id, "text": event.text}
    if isinstance(event, PromptDone):
        return {
            "type": "done",
            "request_id": request_id,
            "final_text": event.final_text,
            "tokens_generated": event.tokens_generated,
            "elapsed_ms": event.elapsed_ms,
        }
    if isinstance(event, PromptFault):
        error = f"{event.error}; fix: {event.fix}" if event.fix else event.error
        return {"type": "fault", "request_id": request_id, "error": error}
    if isinstance(event, PromptCancelled):
        error = "cancelled from the dashboard" + (" while streaming" if event.was_active else "")
        return {"type": "fault", "request_id": request_id, "error": error}
    return None


def encode_line(value: dict[str, Any]) -> bytes:
    """Compact JSON plus a newline, as the seed's `write_json_line` writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class PromptRpcServer:
    """Serves the prompt RPC on `addr`, submitting every request that carries `token` to the
    shared queue."""

    def __init__(
        self,
        queue: PromptQueue,
        addr: RpcAddr,
        *,
        token: str,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        sink: EventSink | None = None,
        first_line_s: float = RPC_FIRST_LINE_S,
        max_unproven: int = RPC_MAX_UNPROVEN,
    ) -> None:
        if not token:
            raise ValueError("the prompt RPC needs a token: an empty one would admit anyone")
        self._token = token
        self._first_line_s = first_line_s
        self._max_unproven = max_unproven
        # Connections open that have not shown the token yet, oldest first.
        self._unproven: dict[asyncio.StreamWriter, None] = {}
        self._queue = queue
        self._addr = addr
        self._default_max_tokens = default_max_tokens
        self._sink = sink
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.bound: RpcAddr | None = None

    async def start(self) -> RpcAddr:
        """Bind and start accepting; returns the bound address (the real port for port 0)."""
        try:
            self._server = await asyncio.start_server(
                self._on_connection, self._addr.host, self._addr.port, limit=MAX_LINE_BYTES
            )
        except OSError as exc:
            error = bind_failed(self._addr, exc)
            if self._sink is not None:  # the seed's `prompt_rpc` failed record, then the error
                self._sink(PromptRpcFailed(at=time.time(), addr=str(self._addr), error=str(error)))
            raise error from exc
        host, port = self._server.sockets[0].getsockname()[:2]
        self.bound = RpcAddr(host, port)
        if self._sink is not None:
            self._sink(PromptRpcListening(at=time.time(), host=host, port=port))
        return self.bound

    async def aclose(self) -> None:
        """Stop listening and end every connection (their prompts are cancelled)."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> PromptRpcServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        while len(self._unproven) >= self._max_unproven:  # the longest waiting makes room
            oldest = next(iter(self._unproven))
            del self._unproven[oldest]
            oldest.transport.abort()  # its read ends at once; its task closes the rest
        self._connections.add(task)
        self._unproven[writer] = None
        proven = [False]
        try:
            await self._serve(reader, writer, proven)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._unproven.pop(writer, None)
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, proven: list[bool]
    ) -> None:
        """Requests one after another until EOF, a blank line or a bad request; the first
        within `first_line_s` of the accept. `proven[0]` turns True (and the connection stops
        counting against the cap) once a request showed the token."""
        while True:
            try:
                if proven[0]:
                    line = await reader.readuntil(b"\n")
                else:
                    line = await asyncio.wait_for(reader.readuntil(b"\n"), self._first_line_s)
            except TimeoutError:
                error = f"no request line within {self._first_line_s:g} s of connecting"
                await _write(writer, {"type": "fault", "request_id": 0, "error": error})
                return
            except asyncio.IncompleteReadError as exc:
                line = exc.partial  # the last request may lack its newline
            except asyncio.LimitOverrunError:
                await _write(
                    writer,
                    {
                        "type": "fault",
                        "request_id": 0,
                        "error": f"parse prompt request: line longer than {MAX_LINE_BYTES} bytes",
                    },
                )
                return
            if not line.strip():
                return
            try:
                request = parse_submit_prompt(line, self._token).with_defaults(
                    self._default_max_tokens
                )
            except RpcRequestError as exc:
                await _write(
                    writer, {"type": "fault", "request_id": exc.request_id, "error": str(exc)}
                )
                return
            if not proven[0]:
                proven[0] = True
                self._unproven.pop(writer, None)
            if not await self._serve_prompt(request, writer):
                return

    async def _serve_prompt(self, request: SubmitPrompt, writer: asyncio.StreamWriter) -> bool:
        """Stream one prompt's lines; False when the client went away (its prompt is cancelled)."""
        events: asyncio.Queue[EngineEvent] = asyncio.Queue()
        prompt_id = self._queue.submit(
            request.prompt_text,
            request.max_tokens,
            source=PromptSource.RPC,
            listener=events.put_nowait,
            request_id=request.request_id,
        )
        ended = False
        try:
            while not ended:
                event = await events.get()
                ended = is_end(event)
                line = rpc_line(event, request.request_id)
                if line is not None:
                    await _write(writer, line)
            return True
        finally:
            if not ended:
                self._queue.cancel(prompt_id)


async def _write(writer: asyncio.StreamWriter, line: dict[str, Any]) -> None:
    writer.write(encode_line(line))
    await writer.drain()

"""The gate: the engine's public port, a proxy that admits only the run's key."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from mvp_tui.node.settings import ENGINE_HOST, GATE_MAX_BODY_BYTES
from mvp_tui.node_protocol import (
    WEBUI_CODE_TTL_S,
    WEBUI_LOGIN_PATH,
    webui_code_valid,
    webui_cookie_value,
    webui_host,
)

# ---------------------------------------------------------------------------------------
# The gate: the engine's public port. An HTTP proxy in front of the engine that admits only
# requests carrying the run's key and counts each use for the idle stop; the engine itself
# listens on a private loopback port.

GATE_HOSTS = ("127.0.0.1", "localhost", "::1")  # a Host header naming anything else (but the
# web UI's own `<label>.localhost`) is a DNS-rebinding page reaching the forwarded port: refused
WEBUI_COOKIE = "mvp_webui"
WEBUI_COOKIE_TTL_S = 8 * 3600  # a web UI login lasts a working day, renewed while it is used
GATE_COPY_CHUNK = 65536
GATE_ENGINE_TIMEOUT_S = 600.0  # a model may think this long before its first token
GATE_CLIENT_TIMEOUT_S = 30.0  # a client silent this long mid-request (or idle) is closed
GATE_MAX_CONNECTIONS = 64  # beyond: 503 at once (no thread, no read)
# Of those, slots only a connection whose request passed the key check may hold: the others
# (not yet past the check) are capped below, and at the cap the one waiting longest is closed
# for the newcomer, so silent or dripping connections cannot keep the key holder out.
GATE_RESERVED_SLOTS = 8
GATE_HEAD_DEADLINE_S = 10.0  # a request's line and headers, from its first byte
GATE_REQUEST_DEADLINE_S = 120.0  # the whole request, head and body, from its first byte
GATE_MAX_HEAD_BYTES = 32 << 10  # read before any check: a longer head is 431, then closed
GATE_LOGIN_BODY_BYTES = 4096
GATE_TURN_AWAY_S = 0.2  # how long a refused connection's request is drained (no RST)
_HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-authenticate",
                          "proxy-authorization", "te", "trailers", "transfer-encoding",
                          "upgrade", "content-length", "host"})
_UI_SITES = ("same-origin", "none")  # Sec-Fetch-Site of the UI's own requests, or the user's

GATE_POLL_S = 0.05  # how soon a closing gate's serving loop notices


def host_name(header: str) -> str | None:
    """The name in a Host header, lower case, without its port; None when malformed."""
    host = header.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        name, port = (host[1:end], host[end + 1 :]) if end > 0 else ("", "")
        if port and not port.startswith(":"):
            return None
        port = port[1:]
    elif host.count(":") == 1:
        name, port = host.split(":")
    else:
        name, port = host, ""
    if not name or (port and not (port.isascii() and port.isdigit())):
        return None
    return name


def _loopback_host(header: str) -> bool:
    return host_name(header) in GATE_HOSTS


class Gate:
    """The engine's public port: admits a request only with `Authorization: Bearer <key>`
    (or, on the web UI's own name, its cookie from the UI's own pages), only for a loopback
    Host, and tells `on_use` of every POST it passes on (a completion, a chat, an embedding:
    what the idle stop counts). No key (`key` empty): it admits every request, and still
    counts. Bounded: `max_connections` at once (503 beyond), bodies up to `max_body`, a
    client silent for `timeout` closed, a request's head within `head_deadline` and all of
    it within `request_deadline` of its first byte, its head at most GATE_MAX_HEAD_BYTES;
    `reserved_slots` of the connections only for requests that passed the key check."""

    def __init__(
        self,
        host: str,
        port: int,
        engine_port: int,
        key: str,
        *,
        engine_key: str = "",
        on_use: Callable[[], None] | None = None,
        max_body: int = GATE_MAX_BODY_BYTES,
        max_connections: int = GATE_MAX_CONNECTIONS,
        reserved_slots: int = GATE_RESERVED_SLOTS,
        timeout: float = GATE_CLIENT_TIMEOUT_S,
        head_deadline: float = GATE_HEAD_DEADLINE_S,
        request_deadline: float = GATE_REQUEST_DEADLINE_S,
    ) -> None:
        self.host, self.port, self.engine_port = host, port, engine_port
        self.key, self.engine_key = key, engine_key
        self.webui_host = webui_host(key) if key else ""
        self.on_use = on_use
        self.max_body, self.max_connections, self.timeout = max_body, max_connections, timeout
        self.unchecked_cap = max(1, max_connections - reserved_slots)
        self.head_deadline, self.request_deadline = head_deadline, request_deadline
        self.uses = 0
        self._server: Any = None
        self._spent: dict[str, float] = {}  # login codes taken: nonce → expiry
        self._spent_lock = threading.Lock()

    def host_ok(self, header: str) -> bool:
        name = host_name(header)
        return name in GATE_HOSTS or bool(self.webui_host and name == self.webui_host)

    def bearer_ok(self, headers: Any) -> bool:
        import hmac

        if not self.key:
            return True
        auth = str(headers.get("Authorization") or "")
        return auth[:7].lower() == "bearer " and hmac.compare_digest(
            auth[7:].strip().encode(), self.key.encode()
        )

    def cookie_expiry(self, headers: Any, method: str) -> int | None:
        """The expiry of a good web UI cookie on a request the UI itself made, else None.
        Only on the UI's own name; a request with an `Origin` must come from that origin
        (`http://` + Host); one without (a same-origin GET, a navigation) must say it is
        the UI's own or the user's (`Sec-Fetch-Site`): cross-site pages that make the
        browser send the cookie are refused."""
        import hmac

        host = str(headers.get("Host") or "").strip().lower()
        if not self.key or host_name(host) != self.webui_host:
            return None
        origin = str(headers.get("Origin") or "").strip().lower()
        if origin:
            if origin != f"http://{host}":
                return None
        elif method not in ("GET", "HEAD") or headers.get("Sec-Fetch-Site") not in _UI_SITES:
            return None
        for part in str(headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            expiry = value.partition(".")[0]
            if name != WEBUI_COOKIE or not (expiry.isascii() and expiry.isdigit()):
                continue
            good = webui_cookie_value(self.key, self.webui_host, int(expiry))
            if hmac.compare_digest(value.encode(), good.encode()) and int(expiry) > time.time():
                return int(expiry)
        return None

    def new_cookie(self) -> str:
        expiry = int(time.time()) + WEBUI_COOKIE_TTL_S
        value = webui_cookie_value(self.key, self.webui_host, expiry)
        # Host-only on the UI's own name (no Domain). Lax, not Strict: what keeps other sites
        # out is the Origin / Sec-Fetch-Site check, which no browser lets a page forge.
        return (f"{WEBUI_COOKIE}={value}; Max-Age={WEBUI_COOKIE_TTL_S}; HttpOnly; "
                "SameSite=Lax; Path=/")

    def spend_code(self, code: str) -> str:
        """"" when `code` logs the browser in now (it is then spent), else why not."""
        now = time.time()
        nonce, why = webui_code_valid(self.key, code, now)
        if why:
            return why
        with self._spent_lock:
            for old in [n for n, e in self._spent.items() if e < now]:
                del self._spent[old]  # expired codes are refused by their expiry anyway
            if nonce in self._spent:
                return "this login code was used already (open the web UI again: `w`)"
            # Kept while the code itself would pass (a node's clock behind this one's).
            self._spent[nonce] = max(float(code.split(".")[1]), now + WEBUI_CODE_TTL_S)
        return ""

    def start(self) -> int:
        """Bind and serve on a thread; the bound port."""
        server = _gate_server()((self.host, self.port), _gate_handler(self.timeout))
        server.gate = self
        self._server = server
        self.port = server.server_address[1]
        # `shutdown()` waits for the loop's next poll: the default 0.5 s was half a second
        # on every stop (bench/bench_local_ready.py), 50 ms costs nothing that shows.
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": GATE_POLL_S},
                         name="gate", daemon=True).start()
        return self.port

    def used(self) -> None:
        self.uses += 1
        if self.on_use is not None:
            self.on_use()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _refusal(status: int, message: str) -> tuple[bytes, list[tuple[str, str]]]:
    body = json.dumps({"error": {"code": status, "message": message,
                                 "type": "authentication_error" if status in (401, 403)
                                 else "invalid_request_error"}}).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if status == 401:
        headers.append(("WWW-Authenticate", 'Bearer realm="mvp-tui"'))
    return body, headers


def _turn_away(sock: socket.socket) -> None:
    """A 503 written straight from the accepting thread, then the request drained briefly
    so the close is no reset that would lose the answer."""
    body, headers = _refusal(503, "the gate is at its connection limit; retry shortly")
    head = "HTTP/1.1 503 Service Unavailable\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in [*headers, ("Retry-After", "1"), ("Connection", "close")]
    )
    with contextlib.suppress(OSError):
        sock.settimeout(GATE_TURN_AWAY_S)
        sock.sendall(head.encode() + b"\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + GATE_TURN_AWAY_S
        while time.monotonic() < deadline and sock.recv(GATE_COPY_CHUNK):
            pass


def _gate_server() -> Any:
    """The gate's server class: one thread per connection, at most `max_connections` of
    them, of which those not yet past the key check are capped lower (`unchecked_cap`): at
    that cap the one waiting longest is closed for the newcomer (a real client sends its
    head at once; a silent or dripping one has had its chance), and 503 only when every
    slot serves a request that passed the check."""
    from http.server import ThreadingHTTPServer

    class GateServer(ThreadingHTTPServer):
        daemon_threads = True
        gate: Gate

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.slots_lock = threading.Lock()
            self.unchecked: dict[Any, None] = {}  # oldest first: not yet past the key check
            self.checked: set[Any] = set()

        def process_request(self, request: Any, client_address: Any) -> None:
            gate = self.gate
            with self.slots_lock:
                held = len(self.unchecked) + len(self.checked)
                evicted = None
                if self.unchecked and (len(self.unchecked) >= gate.unchecked_cap
                                       or held >= gate.max_connections):
                    evicted = next(iter(self.unchecked))
                    del self.unchecked[evicted]
                    held -= 1
                full = held >= gate.max_connections
                if not full:
                    self.unchecked[request] = None
            if evicted is not None:
                with contextlib.suppress(OSError):
                    evicted.shutdown(socket.SHUT_RDWR)  # its thread sees the end and leaves
            if full:
                _turn_away(request)
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.release(request)
                raise

        def passed_check(self, request: Any) -> bool:
            """This connection's request passed the key check: a reserved slot may hold it.
            False when the connection was evicted meanwhile (its head had arrived, but a
            newcomer took its slot first): it holds no slot, so it is not served."""
            with self.slots_lock:
                if request not in self.unchecked:
                    return request in self.checked
                del self.unchecked[request]
                self.checked.add(request)
                return True

        def release(self, request: Any) -> None:
            with self.slots_lock:
                self.unchecked.pop(request, None)
                self.checked.discard(request)

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.release(request)

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client gone mid-answer; nothing of a request is logged (its headers)

    return GateServer


class _HeadTooLarge(Exception):
    """A request's line and headers went past GATE_MAX_HEAD_BYTES."""


class _RequestReader(io.RawIOBase):
    """The client side of one gate connection, read under bounds: every read by the
    client's silence (`idle_s`); from a request's first byte, by its head deadline, then by
    its whole-request deadline; while its head is read, by a byte budget."""

    def __init__(self, sock: socket.socket, gate: Gate) -> None:
        super().__init__()
        self.sock, self.gate = sock, gate
        self.first_byte_at: float | None = None
        self.deadline: float | None = None
        self.head_left: int | None = None  # bytes the head may still take; None: not reading one

    def readable(self) -> bool:
        return True

    def new_request(self) -> None:
        self.first_byte_at = self.deadline = None
        self.head_left = GATE_MAX_HEAD_BYTES

    def head_read(self) -> None:
        """The head is in: the body's bound is the whole request's deadline."""
        self.head_left = None
        if self.first_byte_at is not None:
            self.deadline = self.first_byte_at + self.gate.request_deadline

    def request_read(self) -> None:
        """The whole request is in: only the client's silence bounds what follows."""
        self.head_left = self.deadline = None
        self.sock.settimeout(self.gate.timeout)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        if self.head_left is not None:
            if self.head_left <= 0:
                raise _HeadTooLarge()
            view = view[: self.head_left]
        wait = self.gate.timeout
        if self.deadline is not None:
            wait = min(wait, self.deadline - time.monotonic())
            if wait <= 0:
                raise socket.timeout("the request's deadline passed")  # noqa: UP041 (3.8)
        self.sock.settimeout(wait)
        count = self.sock.recv_into(view)
        if count and self.first_byte_at is None:
            self.first_byte_at = time.monotonic()
            self.deadline = self.first_byte_at + self.gate.head_deadline
        if self.head_left is not None:
            self.head_left -= count
        return count


def _login_page() -> bytes:
    # A page of the UI's own origin sends the browser on: that request is then same-origin
    # (a redirect from the login POST would carry the file:// page's cross-site mark).
    return (b"<!doctype html><meta charset=utf-8><title>mvp-tui: web UI</title>"
            b'<meta name="referrer" content="no-referrer">'
            b'<a href="/">open the web UI</a><script>location.replace("/")</script>\n')


def _gate_handler(client_timeout: float) -> Any:
    """The gate's request handler class (http.server loads only when a gate opens)."""
    import http.client
    from http.server import BaseHTTPRequestHandler

    class GateHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = client_timeout  # each read and write: a silent client is closed

        def setup(self) -> None:
            super().setup()
            # A stream is many small writes: Nagle's algorithm would hold each behind the
            # client's delayed ACK.
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.rfile.close()  # the request side is read under the gate's bounds instead
            self.reader = _RequestReader(self.connection, self.server.gate)  # type: ignore[attr-defined]
            self.rfile = io.BufferedReader(self.reader)

        def handle_one_request(self) -> None:
            self.reader.new_request()
            try:
                super().handle_one_request()
            except _HeadTooLarge:
                self.close_connection = True
                body, headers = _refusal(431, f"request head over {GATE_MAX_HEAD_BYTES} bytes")
                head = "HTTP/1.1 431 Request Header Fields Too Large\r\n" + "".join(
                    f"{k}: {v}\r\n" for k, v in [*headers, ("Connection", "close")])
                with contextlib.suppress(OSError):
                    self.connection.sendall(head.encode() + b"\r\n" + body)

        def parse_request(self) -> bool:
            ok = super().parse_request()
            self.reader.head_read()
            return ok

        def log_message(self, format: str, *args: Any) -> None:
            pass  # nothing of a request is logged: its headers hold the key

        def _refuse(self, status: int, message: str, *, unread: bool = False) -> None:
            """An error answer; `unread`: a body was left unread, so the connection ends."""
            body, headers = _refusal(status, message)
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            if unread:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        def _length(self, cap: int) -> int | None:
            """The body's length, checked before a byte of it is read; None: refused."""
            if self.headers.get("Transfer-Encoding"):
                self._refuse(411, "send a Content-Length, not a chunked body", unread=True)
                return None
            values = {v.strip() for v in self.headers.get_all("Content-Length") or []}
            raw = values.pop() if len(values) == 1 else "0" if not values else "x"
            if not (raw.isascii() and raw.isdigit()):
                self._refuse(400, "Content-Length must be one decimal number", unread=True)
                return None
            if int(raw) > cap:
                self._refuse(413, f"request body over {cap} bytes", unread=True)
                return None
            return int(raw)

        def _login(self, gate: Gate) -> None:
            if not gate.key or gate.webui_host != host_name(str(self.headers.get("Host"))):
                self._refuse(403, "the web UI opens on its own name: press `w` in the "
                             "dashboard", unread=True)
                return
            length = self._length(GATE_LOGIN_BODY_BYTES)
            if length is None:
                return
            body = self.rfile.read(length)
            self.reader.request_read()
            fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            why = gate.spend_code((fields.get("code") or [""])[0])
            if why:
                self._refuse(401, why)
                return
            page = _login_page()
            self.send_response(200)
            self.send_header("Set-Cookie", gate.new_cookie())
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def _handle(self) -> None:
            gate: Gate = self.server.gate  # type: ignore[attr-defined]
            body_sent = self.headers.get("Content-Length") not in (None, "0") or bool(
                self.headers.get("Transfer-Encoding"))
            if not gate.host_ok(str(self.headers.get("Host") or "")):
                self._refuse(403, "this endpoint answers only to 127.0.0.1 or localhost",
                             unread=body_sent)
                return
            if any(ord(c) < 0x21 or ord(c) == 0x7F for c in self.path):
                # http.client would refuse to send it on (InvalidURL): say so, at once.
                self._refuse(400, "the request path holds a control character or a space",
                             unread=body_sent)
                return
            if self.command == "POST" and self.path.split("?", 1)[0] == WEBUI_LOGIN_PATH:
                self._login(gate)
                return
            renew = False
            if not gate.bearer_ok(self.headers):
                expiry = gate.cookie_expiry(self.headers, self.command)
                if expiry is None:
                    self._refuse(401, "missing or wrong API key (Authorization: Bearer <key>; "
                                 "`mvp-tui endpoint` prints it)", unread=body_sent)
                    return
                renew = expiry - time.time() < WEBUI_COOKIE_TTL_S / 2
            if not self.server.passed_check(self.request):  # type: ignore[attr-defined]
                self.close_connection = True  # evicted for a newcomer: its socket is shut
                return
            length = self._length(gate.max_body)
            if length is None:
                return
            body = self.rfile.read(length) if length else b""
            if len(body) < length:  # the client ended it: nothing to pass on
                self.close_connection = True
                return
            self.reader.request_read()
            if self.command == "POST":
                gate.used()
            self._forward(gate, body, gate.new_cookie() if renew else "")

        def _forward(self, gate: Gate, body: bytes, cookie: str) -> None:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in _HOP_HEADERS and k.lower() not in
                       ("authorization", "cookie")}
            headers["Host"] = f"{ENGINE_HOST}:{gate.engine_port}"
            headers["Connection"] = "close"  # its body then ends with the connection
            if gate.engine_key:
                headers["Authorization"] = f"Bearer {gate.engine_key}"
            conn = http.client.HTTPConnection(
                ENGINE_HOST, gate.engine_port, timeout=GATE_ENGINE_TIMEOUT_S
            )
            try:
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
            except OSError:
                conn.close()
                self._refuse(502, "the engine does not answer")
                return
            except (http.client.HTTPException, ValueError):  # a request it cannot send on
                conn.close()
                self._refuse(400, "this request cannot be passed on to the engine")
                return
            try:
                self._relay(answer, cookie)
            except OSError:
                self.close_connection = True  # the client went away mid-stream
            finally:
                conn.close()

        def _relay(self, answer: Any, cookie: str) -> None:
            """The engine's answer, streamed on as it comes (an SSE stream chunk by chunk);
            `cookie`: the web UI's renewed login, set on the way."""
            self.send_response(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in _HOP_HEADERS and name.lower() != "set-cookie":
                    self.send_header(name, value)
            if cookie:
                self.send_header("Set-Cookie", cookie)
            length = answer.getheader("Content-Length")
            bodiless = self.command == "HEAD" or answer.status in (204, 304)
            if length is not None or bodiless:
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
                while not bodiless:
                    data = answer.read(GATE_COPY_CHUNK)
                    if not data:
                        break
                    self.wfile.write(data)
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if answer.chunked:
                # Passed on as the engine framed it, byte for byte, until it closes (asked
                # to): no parsing per chunk on the way.
                while data := answer.fp.read1(GATE_COPY_CHUNK):
                    self.wfile.write(data)
                return
            while data := answer.read1(GATE_COPY_CHUNK):  # to its end: framed here
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_HEAD = do_PATCH = _handle

    return GateHandler

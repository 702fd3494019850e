"""The gate on its own, in front of a fake engine, over real loopback sockets: its limits (a
client's silence, a connection cap, a checked and capped Content-Length, Host and size
checked before any body is read) and the web UI's login (its own `<label>.localhost` name, a
one-time code, a cookie with an expiry that only the UI's own requests may use)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from mvp_tui.node.gate import GATE_MAX_HEAD_BYTES, WEBUI_COOKIE, WEBUI_COOKIE_TTL_S, Gate
from mvp_tui.node_protocol import webui_cookie_value, webui_host, webui_login_code

KEY = "mvp-run-key-for-the-gate-0123456789"
ENGINE_KEY = "engine-key-0123456789"
UI = webui_host(KEY)


class _Engine(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, str]]] = []
    release: ClassVar[threading.Event] = threading.Event()  # /slow answers once it is set

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        type(self).seen.append(dict(self.headers.items()))
        if self.path == "/slow":
            type(self).release.wait(10)
        out = json.dumps({"ok": True, "bytes": len(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _answer


@pytest.fixture
def engine() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    server.daemon_threads = True
    _Engine.seen = []
    _Engine.release = threading.Event()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _gate(engine_port: int, **limits: Any) -> Gate:
    gate = Gate("127.0.0.1", 0, engine_port, KEY, engine_key=ENGINE_KEY, **limits)
    gate.start()
    return gate


@pytest.fixture
def gate(engine: int) -> Iterator[Gate]:
    gate = _gate(engine, timeout=5.0)
    yield gate
    gate.close()


def _raw(port: int, head: str, body: bytes = b"", timeout: float = 3.0) -> tuple[int, str, bytes]:
    """One request as raw bytes (no client library fixing its headers): status, head, body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        top, _, rest = data.partition(b"\r\n\r\n")
        text = top.decode()
        length = next((int(line.split(":", 1)[1]) for line in text.splitlines()
                       if line.lower().startswith("content-length:")), 0)
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    return int(text.split(" ", 2)[1]), text, rest


def _request(port: int, method: str, path: str, headers: dict[str, str],
             body: bytes = b"", timeout: float = 3.0) -> tuple[int, str, bytes]:
    headers = {"Host": f"127.0.0.1:{port}", **headers}
    if body or method == "POST":
        headers.setdefault("Content-Length", str(len(body)))
    head = f"{method} {path} HTTP/1.1\n" + "".join(f"{k}: {v}\n" for k, v in headers.items())
    return _raw(port, head, body, timeout)


def _login(port: int, code: str, host: str = UI) -> tuple[int, str, bytes]:
    form = f"code={code}".encode()
    return _request(port, "POST", "/mvp/webui", {
        "Host": f"{host}:{port}", "Origin": "null",
        "Content-Type": "application/x-www-form-urlencoded"}, form)


def _cookie(head: str) -> str:
    line = next(x for x in head.splitlines() if x.lower().startswith("set-cookie:"))
    return line.split(":", 1)[1].strip()


# -- limits -----------------------------------------------------------------------------


def test_a_body_over_the_cap_is_refused_before_a_byte_of_it_is_read(engine: int) -> None:
    gate = _gate(engine, max_body=1024, timeout=30.0)
    try:
        # No body follows: a gate that read it first would wait (30 s) and answer nothing.
        status, _, body = _request(gate.port, "POST", "/v1/chat/completions",
                                   {"Authorization": f"Bearer {KEY}",
                                    "Content-Length": str(10 << 20)})
        assert status == 413 and b"over 1024 bytes" in body
        status, _, _ = _request(gate.port, "POST", "/v1/chat/completions",
                                {"Authorization": f"Bearer {KEY}"}, b"x" * 1024)
        assert status == 200  # at the cap: passed on
    finally:
        gate.close()


def test_the_login_reads_no_body_before_host_and_size(gate: Gate) -> None:
    big = {"Content-Length": str(4 << 20), "Content-Type": "application/x-www-form-urlencoded"}
    status, _, _ = _request(gate.port, "POST", "/mvp/webui", big)  # 127.0.0.1: not the UI's
    assert status == 403
    status, _, _ = _request(gate.port, "POST", "/mvp/webui", {**big, "Host": UI})
    assert status == 413  # the UI's name, a body over 4 KiB: refused unread
    status, _, _ = _request(gate.port, "POST", "/v1/chat/completions",
                            {**big, "Host": "evil.example"})
    assert status == 403  # a rebound name, before its size or key is looked at


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", " 12x", "+7"])
def test_a_content_length_that_is_no_number_is_400(gate: Gate, length: str) -> None:
    status, _, body = _request(gate.port, "POST", "/v1/chat/completions",
                               {"Authorization": f"Bearer {KEY}", "Content-Length": length})
    assert status == 400 and b"Content-Length" in body


def test_two_different_content_lengths_are_400(gate: Gate) -> None:
    head = (f"POST /v1/chat/completions HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {KEY}"
            "\nContent-Length: 2\nContent-Length: 3\n")
    assert _raw(gate.port, head, b"{}")[0] == 400


def test_a_silent_client_is_closed_after_the_timeout(engine: int) -> None:
    gate = _gate(engine, timeout=0.3)
    try:
        with socket.create_connection(("127.0.0.1", gate.port), timeout=5) as sock:
            started = time.monotonic()
            assert sock.recv(1024) == b""  # closed by the gate, not by our 5 s
            assert time.monotonic() - started < 4
    finally:
        gate.close()


def test_connections_beyond_the_cap_get_503_and_a_freed_slot_serves_again(engine: int) -> None:
    """503 only when every slot serves a request that passed the key check."""
    # No reserved slots: both held requests may wait for their key check at once (with one
    # allowed, the second would evict the first before its check on a loaded machine).
    gate = _gate(engine, max_connections=2, reserved_slots=0, timeout=10.0)
    keyed = {"Authorization": f"Bearer {KEY}"}
    # The held requests wait for the release, not for a client timeout: on a loaded machine a
    # 3 s one could close a slot before the third request is sent, and that one would be served.
    slow = [threading.Thread(target=_request, args=(gate.port, "GET", "/slow", keyed),
                             kwargs={"timeout": 30.0}) for _ in range(2)]
    try:
        for thread in slow:
            thread.start()
        _engine_holds(2)
        status, head, body = _request(gate.port, "GET", "/v1/models", keyed)
        assert status == 503 and "Retry-After: 1" in head and b"connection limit" in body
        _Engine.release.set()
        for thread in slow:
            thread.join(5)
        deadline = time.monotonic() + 5
        while True:  # the slots are free once their threads saw the close
            status = _request(gate.port, "GET", "/v1/models", keyed)[0]
            if status == 200 or time.monotonic() > deadline:
                break
        assert status == 200
    finally:
        _Engine.release.set()
        gate.close()


def _engine_holds(count: int) -> None:
    """Wait (bounded) until the fake engine has seen `count` requests."""
    deadline = time.monotonic() + 5
    while len(_Engine.seen) < count and time.monotonic() < deadline:
        _Engine.release.wait(0.01)
    assert len(_Engine.seen) == count


def _closed_while_dripping(sock: socket.socket, data: bytes, within: float) -> float | None:
    """Send `data` a byte every 0.1 s (the drip is the attack's own pace); the seconds until
    the gate closed the connection, or None when it was still open after `within`."""
    started = time.monotonic()
    sock.settimeout(0.1)
    for byte in data:
        if time.monotonic() - started > within:
            return None
        try:
            sock.sendall(bytes([byte]))
            if sock.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue  # still open: the next byte
        except OSError:
            return time.monotonic() - started  # reset by the gate
    return None


def test_a_dripping_head_is_closed_at_its_deadline(engine: int) -> None:
    gate = _gate(engine, timeout=5.0, head_deadline=0.5)
    try:
        with socket.create_connection(("127.0.0.1", gate.port), timeout=5) as sock:
            head = b"GET /v1/models HTTP/1.1\r\nX-Drip: " + b"a" * 200
            took = _closed_while_dripping(sock, head, within=4.0)
        assert took is not None and took < 4.0, "a byte each 0.1 s kept the head open"
    finally:
        gate.close()


def test_a_dripping_body_is_closed_at_the_requests_deadline(engine: int) -> None:
    gate = _gate(engine, timeout=5.0, request_deadline=1.0)
    try:
        with socket.create_connection(("127.0.0.1", gate.port), timeout=5) as sock:
            sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         f"Authorization: Bearer {KEY}\r\nContent-Length: 400\r\n\r\n".encode())
            took = _closed_while_dripping(sock, b"x" * 400, within=4.0)
        assert took is not None and took < 4.0, "a byte each 0.1 s kept the body open"
        assert _Engine.seen == []  # nothing of it reached the engine
    finally:
        gate.close()


def test_a_head_over_the_cap_is_431_before_any_check(gate: Gate) -> None:
    pad = "a" * (GATE_MAX_HEAD_BYTES + 1024)  # one line, under http.server's own 64 KiB
    head_text = f"GET /v1/models HTTP/1.1\nHost: 127.0.0.1\nX-Pad: {pad}\n"
    status, head, body = _raw(gate.port, head_text)
    assert status == 431 and "Connection: close" in head and b"request head over" in body
    status, _, _ = _raw(gate.port, "GET /v1/models HTTP/1.1\nHost: 127.0.0.1\nX-Pad: a\n")
    assert status == 401  # a head under the cap reaches the key check


def test_silent_and_dripping_connections_cannot_keep_the_key_holder_out(engine: int) -> None:
    """Ten connections that never finish a head, on a gate of six slots: the key holder is
    served (the longest waiting is closed for each newcomer), and so are two of its
    requests at once while more crowd in (the reserved slots)."""
    gate = _gate(engine, max_connections=6, reserved_slots=2, timeout=10.0)
    crowd = [socket.create_connection(("127.0.0.1", gate.port), timeout=5) for _ in range(10)]
    try:
        for sock in crowd[::2]:
            sock.sendall(b"GET / HTTP/1.1\r\nX-Drip: a")  # a head begun, never ended
        keyed = {"Authorization": f"Bearer {KEY}"}
        assert _request(gate.port, "GET", "/v1/models", keyed)[0] == 200
        assert crowd[0].recv(1024) == b""  # the longest waiting was closed for a newcomer
        slow = [threading.Thread(target=_request, args=(gate.port, "GET", "/slow", keyed))
                for _ in range(2)]
        for thread in slow:
            thread.start()
        _engine_holds(3)  # both slow requests are at the engine at once
        crowd += [socket.create_connection(("127.0.0.1", gate.port), timeout=5)
                  for _ in range(10)]
        assert _request(gate.port, "GET", "/v1/models", keyed)[0] == 200
        _Engine.release.set()
        for thread in slow:
            thread.join(5)
    finally:
        _Engine.release.set()
        for sock in crowd:
            sock.close()
        gate.close()


@pytest.mark.parametrize("path", ["/v1/models\x01", "/v1/\x7fmodels", "/v1/models?q=\x00"])
def test_a_control_character_in_the_path_is_400(gate: Gate, path: str) -> None:
    head = f"GET {path} HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {KEY}\n"
    status, _, body = _raw(gate.port, head)
    assert status == 400 and b"control character" in body
    assert _Engine.seen == []  # nothing reached the engine
    assert _request(gate.port, "GET", "/v1/models", {"Authorization": f"Bearer {KEY}"})[0] == 200


# -- the web UI's login and cookie ------------------------------------------------------


def test_the_ui_name_is_the_runs_own_and_takes_the_key(gate: Gate) -> None:
    assert UI.endswith(".localhost") and KEY not in UI
    bearer = {"Authorization": f"Bearer {KEY}"}
    assert _request(gate.port, "GET", "/v1/models", {**bearer, "Host": UI})[0] == 200
    other = {**bearer, "Host": "mvp-0000.localhost"}
    assert _request(gate.port, "GET", "/v1/models", other)[0] == 403


def test_a_login_code_is_spent_once_and_gives_a_cookie_for_the_ui_name_only(gate: Gate) -> None:
    code = webui_login_code(KEY, time.time())
    status, head, page = _login(gate.port, code)
    assert status == 200 and b'location.replace("/")' in page  # same-origin from here
    cookie = _cookie(head)
    assert cookie.startswith(f"{WEBUI_COOKIE}=") and KEY not in cookie
    assert f"Max-Age={WEBUI_COOKIE_TTL_S}" in cookie and "HttpOnly" in cookie
    assert "domain" not in cookie.lower()  # host-only: the UI's name
    status, _, body = _login(gate.port, code)
    assert status == 401 and b"used already" in body
    status, _, body = _login(gate.port, webui_login_code(KEY, time.time() - 3600))
    assert status == 401 and b"expired" in body
    assert _login(gate.port, webui_login_code("another-run-key", time.time()))[0] == 401
    assert _login(gate.port, KEY)[0] == 401  # the key itself is no login code


def _logged_in(gate: Gate) -> str:
    status, head, _ = _login(gate.port, webui_login_code(KEY, time.time()))
    assert status == 200
    return _cookie(head).split(";")[0]


def test_the_cookie_serves_only_the_uis_own_requests(gate: Gate) -> None:
    cookie = _logged_in(gate)
    host = f"{UI}:{gate.port}"
    own = {"Host": host, "Cookie": cookie}

    def status(method: str, headers: dict[str, str]) -> int:
        return _request(gate.port, method, "/v1/models", headers)[0]

    assert status("GET", {**own, "Sec-Fetch-Site": "same-origin"}) == 200  # the UI's fetch
    assert status("GET", {**own, "Sec-Fetch-Site": "none"}) == 200  # typed by the user
    assert status("POST", {**own, "Origin": f"http://{host}"}) == 200
    assert _Engine.seen[-1]["Authorization"] == f"Bearer {ENGINE_KEY}"
    assert "Cookie" not in _Engine.seen[-1]
    # Refused: no word of where it comes from, another origin, a cross-site page, a POST
    # without its Origin, the cookie on 127.0.0.1.
    assert status("GET", own) == 401
    assert status("GET", {**own, "Origin": "http://127.0.0.1:9999"}) == 401
    assert status("GET", {**own, "Origin": f"http://{UI}:1"}) == 401
    assert status("GET", {**own, "Sec-Fetch-Site": "cross-site"}) == 401
    assert status("GET", {**own, "Sec-Fetch-Site": "same-site"}) == 401
    assert status("POST", {**own, "Sec-Fetch-Site": "same-origin"}) == 401
    assert status("GET", {"Cookie": cookie, "Sec-Fetch-Site": "same-origin"}) == 401
    assert gate.uses == 1  # the one admitted POST


def test_a_cookie_expires_and_is_renewed_while_used(gate: Gate) -> None:
    host = f"{UI}:{gate.port}"
    ui = {"Host": host, "Sec-Fetch-Site": "same-origin"}
    old = int(time.time()) - 1
    expired = f"{WEBUI_COOKIE}={webui_cookie_value(KEY, UI, old)}"
    assert _request(gate.port, "GET", "/v1/models", {**ui, "Cookie": expired})[0] == 401
    soon = int(time.time()) + 60
    ageing = f"{WEBUI_COOKIE}={webui_cookie_value(KEY, UI, soon)}"
    status, head, _ = _request(gate.port, "GET", "/v1/models", {**ui, "Cookie": ageing})
    assert status == 200
    renewed = _cookie(head).split(";")[0]
    assert int(renewed.split("=", 1)[1].split(".")[0]) > soon + WEBUI_COOKIE_TTL_S / 2
    fresh = _logged_in(gate)
    status, head, _ = _request(gate.port, "GET", "/v1/models", {**ui, "Cookie": fresh})
    assert status == 200 and "set-cookie" not in head.lower()  # young: not renewed
    forged = f"{WEBUI_COOKIE}={soon + 10**6}.{'0' * 64}"
    assert _request(gate.port, "GET", "/v1/models", {**ui, "Cookie": forged})[0] == 401

"""The engine is on loopback: with HTTP_PROXY / HTTPS_PROXY / ALL_PROXY pointing at a proxy
(here a local listener that counts its connections), neither the prompt client nor the node
agent's readiness probe goes through it. A proxy there would carry every prompt and answer,
or, where it cannot reach our loopback, keep the run from ever becoming ready."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mvp_tui.agent_bundle import agent_zip
from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import PromptDone, TextDelta
from tests.prompt.fake_openai import Canned, fake_openai, sse

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class CountingProxy:
    """Accepts connections, counts them, answers nothing useful (a proxy we never want)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            conn.close()

    def close(self) -> None:
        # A close alone does not wake a thread blocked in accept() on Linux (the teardown
        # waited out the join's 5 s); a shutdown does.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(5)


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingProxy]:
    counting = CountingProxy()
    for name in PROXY_VARS:
        monkeypatch.setenv(name, counting.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    yield counting
    counting.close()


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def test_the_prompt_client_ignores_proxy_variables_for_the_engine(
    proxy: CountingProxy,
) -> None:
    body = sse(_chunk({"content": "hi"}), _chunk({}, "stop"), "[DONE]")
    async with fake_openai(Canned(200, body)) as fake, PromptClient(fake.base_url, "m") as client:
        events = [e async for e in client.stream("hello", 4)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hi"]
    assert isinstance(events[-1], PromptDone)
    assert len(fake.requests) == 1 and proxy.connections == 0


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def test_the_agents_readiness_probe_ignores_proxy_variables(
    proxy: CountingProxy, tmp_path: Path
) -> None:
    engine = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{engine.server_address[1]}/health"
    # In a fresh process, as on the node: urllib builds its proxy table from the env there.
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from mvp_tui.node import engine; "
        "print(json.dumps(engine.probe_ready(sys.argv[2])))"
    )
    agent = tmp_path / "agent.pyz"  # the agent alone, as on the node
    shutil.copy(agent_zip(), agent)
    try:
        argv = [sys.executable, "-c", code, str(agent), url]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    finally:
        engine.shutdown()
        engine.server_close()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["ready", 200]
    assert proxy.connections == 0

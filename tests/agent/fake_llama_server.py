"""A stand-in for llama.cpp's `llama-server`: /health answers 503 "Loading model" a few
times, then 200, like the real one while it loads. Tests put it on PATH as `llama-server`.

FAKE_LOADING_PROBES: how many /health probes get 503 first (-1: never ready).
FAKE_READY_HINT_AFTER_S: instead, loading ends by itself that long after the server listens,
and the server then says so on its log ("main: model loaded", as llama-server does).
At start it prints one JSON line: its argv and the names of secret-looking env variables.
FAKE_LOG_FILE: a file whose lines it prints next, as its own log (e.g. `-lv 4` debug lines).
FAKE_REQUESTS_FILE: each POST /v1/chat/completions body is appended there as one JSON line
(what the engine received); the answer is streamed as llama-server streams it
(llm-engine.md §4): a role chunk, `answer <n>` in content chunks (n counts the requests),
the finish chunk, a usage/timings chunk with no choices, then `[DONE]`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _arg(flag: str) -> str:
    return sys.argv[sys.argv.index(flag) + 1]


class Handler(BaseHTTPRequestHandler):
    loading_left = int(os.environ.get("FAKE_LOADING_PROBES", "3"))

    def do_GET(self) -> None:
        if self.path == "/health":
            if Handler.loading_left != 0:
                Handler.loading_left = max(Handler.loading_left - 1, -1)
                body = {"error": {"message": "Loading model", "type": "unavailable_error"}}
                self._send(503, body)
            else:
                self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": "not found"})

    requests = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": "not found"})
            return
        Handler.requests += 1
        log = os.environ.get("FAKE_REQUESTS_FILE")
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write(json.dumps(json.loads(body)) + "\n")
        words = ["answer", f" {Handler.requests}"]
        chunks: list[dict[str, object]] = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
            *({"choices": [{"index": 0, "delta": {"content": w}}]} for w in words),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"completion_tokens": len(words)},
             "timings": {"predicted_per_second": 1000.0, "prompt_ms": 1.0}},
        ]
        data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
        data += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def loaded() -> None:
        Handler.loading_left = 0
        print("main: model loaded", flush=True)

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        print("fake-llama-server: " + format % args, flush=True)


def main() -> None:
    secret_names = [k for k in os.environ if any(p in k.upper() for p in ("KEY", "TOKEN"))]
    print(json.dumps({"argv": sys.argv[1:], "secret_env": secret_names}), flush=True)
    log_file = os.environ.get("FAKE_LOG_FILE")
    if log_file:
        with open(log_file, encoding="utf-8") as lines:
            sys.stdout.write(lines.read())
        sys.stdout.flush()
    server = ThreadingHTTPServer((_arg("--host"), int(_arg("--port"))), Handler)
    hint_after = os.environ.get("FAKE_READY_HINT_AFTER_S")
    if hint_after is not None:
        Handler.loading_left = -1
        threading.Timer(float(hint_after), Handler.loaded).start()
    server.serve_forever()


if __name__ == "__main__":
    main()

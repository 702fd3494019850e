"""A stand-in for llama.cpp's `llama-server`: /health answers 503 "Loading model" a few
times, then 200, like the real one while it loads. Tests put it on PATH as `llama-server`.

FAKE_LOADING_PROBES: how many /health probes get 503 first (-1: never ready).
FAKE_READY_HINT_AFTER_S: instead, loading ends by itself that long after the server listens,
and the server then says so on its log ("main: model loaded", as llama-server does).
At start it prints one JSON line: its argv and the names of secret-looking env variables.
FAKE_LOG_FILE: a file whose lines it prints next, as its own log (e.g. `-lv 4` debug lines,
or a recorded load log with its "offloaded N/M layers to GPU" line).
Slots as the pinned build (llama.cpp in llama-cpp-python 0.3.36, tools/server/server.cpp) has
them: `-np N` slots, unset ("auto") 4; a request past them waits for a free one. A streamed
POST /v1/chat/completions holds a slot while it streams; FAKE_STREAMS_TOGETHER=K: each stream
sends its tokens only once K streams hold slots at the same time (what a test of K concurrent
streams waits for), and ends without [DONE] when that does not come within 10 s.
`--help` prints the flags the agent looks for, as llama-server does; FAKE_NO_FIT=1: as a
build from before `--fit` (2025) prints them; FAKE_NO_VERBOSITY=1: as one from before the
2024 logging rework (no `-lv`). Such a build refuses the flag it lacks, as llama-server
refuses any unknown argument.
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

AUTO_SLOTS = 4  # the pinned build's `-np -1` (auto): 4 slots, one unified KV cache
TOGETHER_WAIT_S = 10.0


def _arg(flag: str) -> str:
    return sys.argv[sys.argv.index(flag) + 1]


class Handler(BaseHTTPRequestHandler):
    loading_left = int(os.environ.get("FAKE_LOADING_PROBES", "3"))
    slots = threading.Semaphore(AUTO_SLOTS)
    together: threading.Barrier | None = None

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
        with Handler.slots:  # a request past the slots waits for one, as llama-server's do
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
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            if Handler.together is not None:
                try:
                    Handler.together.wait(TOGETHER_WAIT_S)
                except threading.BrokenBarrierError:
                    return  # no [DONE]: the streams never ran together
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

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


HELP = "-ngl,  --gpu-layers, --n-gpu-layers N   max. number of layers to store in VRAM\n"
VERBOSITY_HELP = "-lv,   --verbosity, --log-verbosity N   set the verbosity threshold\n"
FIT_HELP = "-fit,  --fit [on|off]                   whether to adjust unset arguments to fit\n"


def main() -> None:
    lacks = {flag for flag, env in (("--fit", "FAKE_NO_FIT"), ("-lv", "FAKE_NO_VERBOSITY"))
             if os.environ.get(env)}
    if "--help" in sys.argv:
        sys.stdout.write(HELP + ("" if "-lv" in lacks else VERBOSITY_HELP)
                         + ("" if "--fit" in lacks else FIT_HELP))
        return
    for flag in lacks & set(sys.argv):
        print(f"error: invalid argument: {flag}", file=sys.stderr, flush=True)
        sys.exit(1)
    secret_names = [k for k in os.environ if any(p in k.upper() for p in ("KEY", "TOKEN"))]
    print(json.dumps({"argv": sys.argv[1:], "secret_env": secret_names}), flush=True)
    log_file = os.environ.get("FAKE_LOG_FILE")
    if log_file:
        with open(log_file, encoding="utf-8") as lines:
            sys.stdout.write(lines.read())
        sys.stdout.flush()
    slots = int(_arg("-np")) if "-np" in sys.argv else AUTO_SLOTS
    Handler.slots = threading.Semaphore(slots)
    ctx = int(_arg("-c")) if "-c" in sys.argv else 0
    print(f"srv load_model: initializing, n_slots = {slots}, n_ctx_slot = {ctx // slots}",
          flush=True)
    together = os.environ.get("FAKE_STREAMS_TOGETHER")
    if together:
        Handler.together = threading.Barrier(int(together))
    server = ThreadingHTTPServer((_arg("--host"), int(_arg("--port"))), Handler)
    hint_after = os.environ.get("FAKE_READY_HINT_AFTER_S")
    if hint_after is not None:
        Handler.loading_left = -1
        threading.Timer(float(hint_after), Handler.loaded).start()
    server.serve_forever()


if __name__ == "__main__":
    main()

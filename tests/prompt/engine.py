"""A real llama-cpp-python OpenAI server on a free loopback port, for the prompt tests.

The server prints its port (`--port 0`) and, on stdout, "Disconnected from client" when a
client closes a stream early; both are read from its merged output by a reader thread.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from tests.peers import missing_peer

PORT_LINE = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
DISCONNECTED = "Disconnected from client"
ENGINE_FIX = "pip install 'llama-cpp-python[server]==0.3.36' (the project's `local` extra)"


def require_engine() -> None:
    """Skip (laptop) or fail (CI) when llama-cpp-python's server cannot be imported."""
    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette"):
        if importlib.util.find_spec(module) is None:
            missing_peer("llama-cpp-python server", f"module {module} is not installed", ENGINE_FIX,
                         kind="engine")


class LlamaServer:
    """One `python -m llama_cpp.server` process serving `model` as "tiny"."""

    def __init__(self, model: Path, *, n_ctx: int, alias: str = "tiny") -> None:
        self.model = model
        self.n_ctx = n_ctx
        self.alias = alias
        self.lines: list[str] = []
        self.port: int | None = None
        self._changed = threading.Condition()
        self._proc: subprocess.Popen[str] | None = None

    @property
    def base_url(self) -> str:
        assert self.port is not None, "server not started"
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> LlamaServer:
        require_engine()
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model), "--model_alias", self.alias,
            "--host", "127.0.0.1", "--port", "0",
            "--n_ctx", str(self.n_ctx), "--n_threads", "1",
            "--interrupt_requests", "False",
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        threading.Thread(target=self._read, daemon=True).start()
        with self._changed:
            ready = self._changed.wait_for(
                lambda: self.port is not None or self._proc_exited(), timeout
            )
        if self.port is None:
            self.stop()
            tail = "\n".join(self.lines[-20:])
            state = "timed out" if not ready else "exited"
            raise RuntimeError(f"llama_cpp.server {state} before listening:\n{tail}")
        httpx.get(f"{self.base_url}/v1/models", timeout=10).raise_for_status()
        return self

    def _proc_exited(self) -> bool:
        return self._proc is not None and self._proc.poll() is not None

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                match = PORT_LINE.search(line)
                if match and self.port is None:
                    self.port = int(match.group(1))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def count(self, needle: str) -> int:
        with self._changed:
            return sum(needle in line for line in self.lines)

    def wait_for_count(self, needle: str, count: int, timeout: float) -> bool:
        """Block until `needle` has appeared in `count` output lines (call via to_thread)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: sum(needle in line for line in self.lines) >= count, timeout
            )

    def kill(self) -> None:
        """SIGKILL, as a crashed engine: no clean end of any open stream."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)

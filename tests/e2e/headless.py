"""`mvp-tui up --headless` as a real child process, its JSON lines read as they arrive."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Record = dict[str, Any]


class HeadlessRun:
    def __init__(self, args: list[str], state_dir: Path, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.state_dir = state_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
        # A free port for the run's OpenAI endpoint (tests run side by side); a test of the
        # fixed default sets it.
        self.env.update({"MVP_STATE_DIR": str(state_dir), "MVP_PROMPT_OPENAI_PORT": "0",
                         **(env or {})})
        self.records: list[Record] = []
        self.stderr = ""
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> HeadlessRun:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mvp_tui", "up", "--headless", *self.args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def until(self, match: Callable[[Record], bool], within: float = 60.0) -> Record:
        """The first record (already seen or new) matching; fails after `within`."""
        for record in self.records:
            if match(record):
                return record
        assert self.proc is not None and self.proc.stdout is not None

        async def read() -> Record:
            assert self.proc is not None and self.proc.stdout is not None
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    err = await self.proc.stderr.read() if self.proc.stderr else b""
                    raise AssertionError(f"run ended before the expected record; stderr: {err!r}")
                record = json.loads(line)
                self.records.append(record)
                if match(record):
                    return record

        return await asyncio.wait_for(read(), within)

    async def finish(self, within: float = 90.0) -> int:
        """Read to the end; the exit code."""
        assert self.proc is not None and self.proc.stdout is not None
        out, err = await asyncio.wait_for(self.proc.communicate(), within)
        self.records.extend(json.loads(line) for line in out.splitlines() if line.strip())
        self.stderr = err.decode()
        assert self.proc.returncode is not None
        return self.proc.returncode

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def events(self, name: str) -> list[Record]:
        return [r for r in self.records if r.get("event") == name]

    def frames(self, channel: str) -> list[Record]:
        return [r for r in self.records if r.get("event") == "frame" and r["channel"] == channel]


def event(name: str) -> Callable[[Record], bool]:
    return lambda r: r.get("event") == name


def weights(kind: str) -> Callable[[Record], bool]:
    return lambda r: (
        r.get("event") == "frame"
        and r.get("channel") == "mvp.worker.weights"
        and isinstance(r.get("payload"), dict)
        and r["payload"].get("type") == kind
    )


def rpc_token(state_dir: Path) -> str:
    """The prompt RPC's token of the newest run under `state_dir` (its endpoint record)."""
    from mvp_tui.lease.endpoint_record import load_endpoint
    from mvp_tui.lease.records import RecordStore

    store = RecordStore(state_dir)
    found = [e for e in (load_endpoint(store, r) for r in store.run_ids()) if e is not None]
    assert found, f"no endpoint record under {state_dir}"
    return max(found, key=lambda e: e.updated_at).rpc_token

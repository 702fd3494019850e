"""Run the node agent as a real subprocess and read its stdout frames, for tests."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mvp_tui.agent_bundle import agent_zip
from mvp_tui.node_protocol import WEIGHTS_CHANNEL
from mvp_tui.secrets import is_secret_name

AGENT_PATH = agent_zip()  # the zipapp every node runs
Frame = tuple[str, Any]


def agent_env(tmp: Path, **overrides: str) -> dict[str, str]:
    """A clean environment for one agent run: no inherited secrets, a private cache."""
    env = {k: v for k, v in os.environ.items() if not is_secret_name(k)}
    env.update(
        MVP_RUN_ID="r-0000abcd",
        MVP_LOGICAL_NODE_ID="1",
        MVP_MODEL_ID="tiny",
        MVP_MAX_CONTEXT="256",
        MVP_ENGINE_THREADS="1",
        MVP_MODEL_CACHE_DIR=str(tmp / "cache"),
        MVP_MODEL_VERIFIED_DIR=str(tmp / "verified"),  # the node's own, off the cache
        MVP_ENGINE_STOP_TIMEOUT_S="10",
    )
    env.update(overrides)
    return env


class AgentRun:
    """One agent process: every stdout line is parsed as a frame as it arrives."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.frames: list[Frame] = []
        self.non_frames: list[bytes] = []
        self.stdout = bytearray()
        self.stderr = bytearray()
        self._changed = asyncio.Condition()
        self._ended_stdout = False
        self._readers = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]

    @classmethod
    async def start(
        cls, env: Mapping[str, str], agent: Path = AGENT_PATH, python: str = sys.executable
    ) -> AgentRun:
        proc = await asyncio.create_subprocess_exec(
            python,
            str(agent),
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        return cls(proc)

    async def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            self.stdout += raw
            try:
                record = json.loads(raw)
                assert record["mvp_frame"] == 1
                self.frames.append((record["channel"], record["payload"]))
            except (ValueError, KeyError, AssertionError, TypeError):
                self.non_frames.append(raw)
            async with self._changed:
                self._changed.notify_all()
        async with self._changed:
            self._ended_stdout = True
            self._changed.notify_all()

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.stderr += raw

    def find(self, match: Callable[[str, Any], bool]) -> Any | None:
        for channel, payload in self.frames:
            if match(channel, payload):
                return payload
        return None

    async def wait_for(self, match: Callable[[str, Any], bool], within: float = 30.0) -> Any:
        """The first frame payload that matches, waiting for it to arrive."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.find(match) is not None or self._ended()),
                within,
            )
        found = self.find(match)
        assert found is not None, f"agent ended without the frame; phases: {self.phases()}"
        return found

    def _ended(self) -> bool:
        return self._ended_stdout

    async def weights(self, within: float = 30.0) -> dict[str, Any]:
        """The record on mvp.worker.weights (WeightsLoaded or WorkerFatal)."""
        payload: dict[str, Any] = await self.wait_for(
            lambda ch, _p: ch == WEIGHTS_CHANNEL, within
        )
        return payload

    async def wait_phase(self, phase: str, status: str, within: float = 30.0) -> Any:
        """The first NodeAgentPhase frame with this phase and status."""
        return await self.wait_for(
            lambda _c, p: (
                isinstance(p, dict)
                and p.get("type") == "NodeAgentPhase"
                and (p.get("phase"), p.get("status")) == (phase, status)
            ),
            within,
        )

    async def send(self, text: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() if isinstance(text, str) else text)
        await self.proc.stdin.drain()

    async def wait_exit(self, within: float = 30.0) -> int:
        code = await asyncio.wait_for(self.proc.wait(), within)
        await asyncio.wait_for(asyncio.gather(*self._readers), within)
        return code

    def phases(self) -> list[tuple[str, str]]:
        return [
            (p["phase"], p["status"])
            for ch, p in self.frames
            if ch == "mvp.node.1.agent" and p.get("type") == "NodeAgentPhase"
        ]

    def phase_detail(self, phase: str, status: str) -> dict[str, Any]:
        for ch, p in self.frames:
            if ch == "mvp.node.1.agent" and (p.get("phase"), p.get("status")) == (phase, status):
                detail: dict[str, Any] = p["detail"]
                return detail
        raise AssertionError(f"no {phase}/{status} frame; phases: {self.phases()}")

    def channel(self, name: str) -> list[Any]:
        return [p for ch, p in self.frames if ch == name]

    async def kill(self) -> None:
        """Test clean-up: nothing of this run may survive the test."""
        if self.proc.returncode is None:
            os.killpg(self.proc.pid, 9)
            await self.proc.wait()
        for task in self._readers:
            task.cancel()

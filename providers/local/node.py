"""The node agent as a child process of this app: start it, pump its output, stop it.

The agent runs in its own process group, so the engine it starts (same group) is stopped
with it. Stopping is polite first (`shutdown` on stdin), then firm (SIGTERM to the group),
then final (SIGKILL), and ends with a sweep of the group for stragglers. Every live group is
also registered for an `atexit` sweep, and the agent is told to shut down when its stdin
closes (MVP_STDIN_EOF_SHUTDOWN), so no child outlives the app even when it crashes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import enum
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LineHandler = Callable[[str, bytes], None]
"""Receives every output line of the agent: kind ("stdout" | "stderr") and the raw bytes
without the newline. Called on the event loop; must not block."""

READ_CHUNK = 64 * 1024
MAX_LINE_BYTES = 1024 * 1024
CUT_MARKER = b" ... [cut]"
EXIT_SWEEP_S = 3.0

# pgid -> pid of every agent started and not yet stopped, for the atexit sweep.
_LIVE_GROUPS: dict[int, int] = {}


class StopHow(enum.Enum):
    """How the agent ended when we stopped it."""

    ALREADY_EXITED = "already_exited"
    SHUTDOWN = "shutdown"  # it obeyed `shutdown` on stdin
    TERMINATED = "terminated"  # SIGTERM to the group
    KILLED = "killed"  # SIGKILL to the group


@dataclass(frozen=True, slots=True)
class StopReport:
    how: StopHow
    exit_code: int | None
    stragglers_killed: int

    def describe(self) -> str:
        text = f"agent {self.how.value}, exit code {self.exit_code}"
        if self.stragglers_killed:
            text += f", {self.stragglers_killed} leftover process(es) killed"
        return text


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids in process group `pgid`, read from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces): state, ppid, pgrp, ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


async def pid_exited(pid: int) -> bool:
    """Wait until process `pid` has ended, woken by its pidfd (any process, not only our
    children). False when pidfds are unavailable here and nothing was awaited."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):
        return False
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    loop.add_reader(pidfd, ended.set)
    try:
        await ended.wait()
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a process group; False when it has no members left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _sweep_all_at_exit() -> None:
    """Last resort when the app exits with agents still running: TERM, short grace, KILL."""
    groups = list(_LIVE_GROUPS)
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + EXIT_SWEEP_S
    while time.monotonic() < deadline and any(group_members(g) for g in groups):
        time.sleep(0.05)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)
        _LIVE_GROUPS.pop(pgid, None)


atexit.register(_sweep_all_at_exit)


class AgentProcess:
    """One running node agent: a child process in its own group, its output pumps."""

    def __init__(self, proc: asyncio.subprocess.Process, on_line: LineHandler | None) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.pgid = proc.pid  # start_new_session: the agent leads its own group
        self.started_at = time.time()
        self._on_line = on_line
        self._exited = asyncio.Event()
        self.stragglers_killed = 0
        self._exit_watch = asyncio.create_task(self._watch_exit(), name=f"agent-{self.pid}-exit")
        assert proc.stdout is not None and proc.stderr is not None
        self._pumps = [
            asyncio.create_task(self._pump(proc.stdout, "stdout"), name=f"agent-{self.pid}-out"),
            asyncio.create_task(self._pump(proc.stderr, "stderr"), name=f"agent-{self.pid}-err"),
        ]
        _LIVE_GROUPS[self.pgid] = self.pid

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        env: Mapping[str, str],
        on_line: LineHandler | None,
        cwd: Path | None = None,
    ) -> AgentProcess:
        """Spawn the agent; raises OSError when it cannot be executed."""
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
        )
        return cls(proc, on_line)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def _watch_exit(self) -> None:
        """Sets `_exited` when the agent process ends. `Process.wait()` alone is not
        enough: it also waits for every holder of the agent's pipes (a leftover child)."""
        if not await pid_exited(self.pid):
            await self.proc.wait()
        self.stragglers_killed = await self._sweep_group()
        self._exited.set()

    async def _sweep_group(self) -> int:
        """Kill what is left in the agent's group the moment the agent ends (its engine, if
        the agent died without stopping it), while the group id cannot have been reused;
        returns how many processes were left."""
        members = group_members(self.pgid)
        if members:
            _signal_group(self.pgid, signal.SIGKILL)
            await self._group_gone(EXIT_SWEEP_S)
        return len(members)

    async def wait_exited(self) -> int | None:
        """The agent's exit status once it has ended (None while the loop has not yet
        reaped it, which follows at once)."""
        await self._exited.wait()
        if self.proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), 1.0)
        return self.proc.returncode

    async def _pump(self, stream: asyncio.StreamReader, kind: str) -> None:
        """Hands every complete line to `on_line`; overlong lines are cut, never buffered
        without bound; a final line without newline is delivered at EOF."""
        pending = bytearray()
        dropping = False
        while True:
            chunk = await stream.read(READ_CHUNK)
            if not chunk:
                break
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                if not dropping:
                    pending += chunk[start:end]
                    self._deliver(kind, bytes(pending))
                pending.clear()
                dropping = False
                start = end + 1
            if not dropping:
                pending += chunk[start:]
                if len(pending) > MAX_LINE_BYTES:
                    self._deliver(kind, bytes(pending[:MAX_LINE_BYTES]) + CUT_MARKER)
                    pending.clear()
                    dropping = True
        if pending and not dropping:
            self._deliver(kind, bytes(pending))

    def _deliver(self, kind: str, line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if self._on_line is None:
            return
        try:
            self._on_line(kind, line)
        except Exception:
            # A faulty consumer must not stop the pipe from draining (the agent would block).
            log.exception("on_line handler failed for a %s line of agent %d", kind, self.pid)

    async def _wait(self, seconds: float) -> bool:
        """True when the agent exited within `seconds`."""
        try:
            await asyncio.wait_for(self._exited.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def _send_shutdown(self) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            return
        with contextlib.suppress(ConnectionError, OSError):
            stdin.write(b"shutdown\n")
            await stdin.drain()

    async def stop(self, shutdown_timeout: float, kill_timeout: float) -> StopReport:
        """Stops the agent and everything in its group; all output is delivered on return."""
        how = StopHow.ALREADY_EXITED
        if not self._exited.is_set() and self.proc.returncode is None:
            how = StopHow.SHUTDOWN
            await self._send_shutdown()
            if not await self._wait(shutdown_timeout):
                how = StopHow.TERMINATED
                _signal_group(self.pgid, signal.SIGTERM)
                if not await self._wait(kill_timeout):
                    how = StopHow.KILLED
                    _signal_group(self.pgid, signal.SIGKILL)
                    await self._exited.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        await self._drain_pumps(kill_timeout)
        _LIVE_GROUPS.pop(self.pgid, None)
        return StopReport(how, await self.wait_exited(), self.stragglers_killed)

    async def _group_gone(self, seconds: float) -> None:
        """Wait (bounded) until every process of the group has died: a SIGKILLed process
        takes a moment to become a zombie, and "destroyed" must mean nothing runs."""
        waits = [pid_exited(pid) for pid in group_members(self.pgid)]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*waits), seconds)

    async def _drain_pumps(self, seconds: float) -> None:
        done, pending = await asyncio.wait(self._pumps, timeout=seconds)
        for task in pending:
            task.cancel()
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.error("output pump of agent %d failed: %r", self.pid, task.exception())

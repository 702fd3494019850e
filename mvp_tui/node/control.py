"""Control: shutdown requests and engine exits, from threads and signal handlers; the control
lines read from stdin and the control fifo."""

from __future__ import annotations

import os
import queue
import stat
import time
from typing import TYPE_CHECKING, Any

from mvp_tui.node.frames import Emitter, clean_text
from mvp_tui.node.settings import EXIT_CONFIG, EXIT_FATAL, ConfigError
from mvp_tui.node_protocol import AgentEnv

if TYPE_CHECKING:
    from mvp_tui.node.switch import Watchdog

# ---------------------------------------------------------------------------------------
# Control: shutdown requests and engine exits, from threads and signal handlers


class Control:
    """The agent's inbox. Signal handlers only assign a flag and use a SimpleQueue (both
    safe there); waiting on the queue is how phases pause without missing a shutdown."""

    STOP = "stop"
    ENGINE_EXIT = "engine_exit"
    NUDGE = "nudge"  # the engine said something that may mean ready: probe now

    def __init__(self) -> None:
        self._events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.stop_source: str | None = None

    @property
    def stop_requested(self) -> bool:
        return self.stop_source is not None

    def request_stop(self, source: str) -> None:
        if self.stop_source is None:
            self.stop_source = source
        self._events.put((self.STOP, source))

    def engine_exited(self, code: int | None) -> None:
        self._events.put((self.ENGINE_EXIT, code))

    def nudge(self) -> None:
        self._events.put((self.NUDGE, None))

    def wait(self, timeout: float | None) -> tuple[str, Any] | None:
        """The next event, or None after `timeout` seconds."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def pause(self, seconds: float) -> None:
        """Wait `seconds` unless a shutdown comes first (then `Interrupted`); other events
        met meanwhile are dropped (callers pause only where nothing else is expected)."""
        deadline = time.monotonic() + seconds
        while not self.stop_requested:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.wait(left)
        raise Interrupted()


class Interrupted(Exception):
    """A shutdown request arrived while a phase was still running."""


SCOPE_HOST = "host"  # this machine failed: another host may well serve (the run goes on)
SCOPE_RUN = "run"  # the image, the model or the config: every host would fail the same way


class PhaseFailed(Exception):
    """A phase cannot complete; carries what the WorkerFatal record says. `scope` tells the
    run whether another host could do better (a config failure never can)."""

    def __init__(
        self,
        reason: str,
        fix: str = "",
        exit_code: int = EXIT_FATAL,
        detail: dict[str, Any] | None = None,
        scope: str = "",
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix
        self.exit_code = exit_code
        self.detail = detail or {}
        self.scope = scope or (SCOPE_RUN if exit_code == EXIT_CONFIG else SCOPE_HOST)


def read_commands(
    fd: int,
    source: str,
    control: Control,
    emitter: Emitter,
    eof_means_shutdown: bool = False,
    watchdog: Watchdog | None = None,
) -> None:
    """Thread body: command lines from stdin or the control fifo (held open read-write, so
    writers coming and going never produce EOF). Raw reads: no Python buffer lock that a
    daemon thread could hold at exit. EOF means shutdown only when asked (our parent's end
    of a pipe closed); a detached agent has /dev/null as stdin."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            raw, pending = pending.split(b"\n", 1)
            _handle_command(raw, source, control, emitter, watchdog)
    if eof_means_shutdown:
        control.request_stop(source + " closed")


def _handle_command(
    raw: bytes, source: str, control: Control, emitter: Emitter, watchdog: Watchdog | None = None
) -> None:
    command = raw.decode("utf-8", "replace").strip()
    if not command:
        return
    word = command.lower()
    if word == "shutdown":
        control.request_stop(source)
    elif word in WATCHDOG_WORDS:
        if watchdog is not None:
            watchdog.command(word, source)
    else:
        emitter.notice(f"ignored unknown command on {source}: {clean_text(command, 80)}")


def open_control_fifo(path: str) -> tuple[int, bool]:
    """Open (creating when absent) the control fifo; returns (fd, created)."""
    created = False
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISFIFO(mode):
            raise ConfigError(
                f"{AgentEnv.env_name('control_fifo')}={path} exists and is not a fifo; fix: "
                "remove it or pick another path"
            )
    except FileNotFoundError:
        os.mkfifo(path, 0o600)
        created = True
    return os.open(path, os.O_RDWR), created


WATCHDOG_WORDS = ("heartbeat", "detach", "attach", "use")  # the switch's control lines


def ms_since(started: float) -> int:
    """Milliseconds since `started` (a `time.monotonic()` reading)."""
    return int((time.monotonic() - started) * 1000)


def exc_name(exc: BaseException) -> str:
    return type(exc).__name__

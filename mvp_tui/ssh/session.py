"""A leased node over SSH: bootstrap with retries, the agent's lines, port forwards, teardown.

Reads like the seed's provision loop: one provider line per attempt; on failure a back-off of
1 s doubling to a 30 s cap; the loop gives up on a changed host key, repeated login refusals,
a local client that keeps failing against a live sshd, or the ready timeout. Once the caller
signals `ready` (the agent reported the engine healthy), retries only keep the connection up:
reconnects resume the agent's lines at the last delivered byte and restore the port forwards
on the same local ports. `close()` stops the agent and the connection; then the caller
destroys the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.node import follow
from mvp_tui.node_protocol import RENTED_IMAGE
from mvp_tui.providers.base import SshEndpoint
from mvp_tui.secrets import Redactor
from mvp_tui.ssh.agent_launch import (
    EXEC_FLAG,
    GO_LINE,
    RUN_NAME,
    AgentPlan,
    UploadMethod,
    follow_command,
    make_plan,
    stop_command,
    upload,
)
from mvp_tui.ssh.backoff import Backoff, Clock, Sleep
from mvp_tui.ssh.banner import ssh_banner, strikes_after
from mvp_tui.ssh.connect import ConnectFailed, open_connection
from mvp_tui.ssh.errors import (
    PINNED_KEY_FIX,
    AuthFailed,
    BootstrapTimedOut,
    HostKeyChanged,
    ImageUnfit,
    LocalSshProblem,
    PinnedKeyNotServed,
    SshError,
)
from mvp_tui.ssh.events import (
    AgentExited,
    AgentStarted,
    AgentStop,
    AttemptOutcome,
    BootstrapReady,
    HostKeyPinned,
    Phase,
    PortForwarded,
    SessionClosed,
    SessionStopped,
    SshAttempt,
    StopReason,
)
from mvp_tui.ssh.forward import Forward, PortForwards
from mvp_tui.ssh.host_key_rotation import RotationPlace, rotate_host_key
from mvp_tui.ssh.hostkeys import HostKeyPins, fingerprint_of
from mvp_tui.ssh.identity import SshIdentity
from mvp_tui.ssh.logtail import (
    FrameError,
    FrameKind,
    HelperFrame,
    LineAssembler,
    LogPositions,
    NodeLineCallback,
    read_frame,
)
from mvp_tui.ssh.settings import SshSettings
from mvp_tui.ssh.user_config import proxied
from mvp_tui.untrusted import one_line_ascii

ProviderLineCallback = Callable[[str], object]
"""Receives one line per attempt and step (routed to `...logs.node.<N>.provider`)."""

_log = logging.getLogger(__name__)
_STOP_WORDS = {stop.value: stop for stop in AgentStop}
_LINE_CHARS = 600  # provider lines and event details: long enough for two fingerprints
# `use`: a key in the dashboard, which postpones the node's idle stop like a request does.
CONTROL_WORDS = frozenset({"heartbeat", "detach", "attach", "use", "shutdown"})
# Failed logins that mean "no sshd there yet": the port is probed, not backed off from.
_PORT_OUTCOMES = frozenset(
    {AttemptOutcome.NOT_LISTENING, AttemptOutcome.TIMED_OUT, AttemptOutcome.DROPPED}
)
# $1 run dir, $2 word: written to the agent's control fifo (its stdin) only while the agent
# runs; `1<>` opens the fifo read-write, so the open never blocks even with no reader.
_SEND_CONTROL = (
    f'cd "$1" && [ -p {follow.CONTROL} ] && [ ! -e {follow.EXIT_CODE} ] && '
    f'pid=$(cat {follow.AGENT_PID}) && kill -0 "$pid" && '
    f"printf '%s\\n' \"$2\" 1<> {follow.CONTROL}"
)


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """How one attempt ended."""

    outcome: AttemptOutcome
    detail: str
    connected: bool = False
    host_key: HostKeyChanged | None = None


class NodeSession:
    """One lease's node over SSH, from the first attempt to teardown."""

    def __init__(
        self,
        endpoint: SshEndpoint,
        identity: SshIdentity,
        pins: HostKeyPins,
        lease_key: str,
        settings: SshSettings,
        sink: EventSink,
        on_node_line: NodeLineCallback,
        on_provider_line: ProviderLineCallback,
        *,
        ready: asyncio.Event | None = None,
        redactor: Redactor | None = None,
        awaiting_pin: bool = False,
        rotate: RotationPlace | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = endpoint
        self.identity = identity
        self.pins = pins
        self.lease_key = lease_key
        self.settings = settings
        self.ready = ready if ready is not None else asyncio.Event()
        self.agent_pid: int | None = None
        self.stop_reason: StopReason | None = None
        self.failure: SshError | None = None
        # The host key was pinned before create: until a connection shows it, another key is
        # "not yet" (retried within the boot budget), never trusted and never sent anything.
        self._awaiting_pin = awaiting_pin
        # Where to rotate that key once it answered (its private half was sent to make it).
        self._rotate = rotate if awaiting_pin else None
        self.last_outcome: AttemptOutcome | None = None  # of the latest attempt
        # Reached through a jump host or proxy (the user's ~/.ssh/config): its port cannot be
        # probed from here, so failed logins back off instead (as the seed's ssh did).
        self._proxied = proxied(settings.config_file, endpoint.host, endpoint.port, endpoint.user)
        self._sink = sink
        self._on_node_line = on_node_line
        self._on_provider_line = on_provider_line
        self._redact = redactor or Redactor()
        self._sleep = sleep
        self._clock = clock
        self._wall = wall
        self._plan: AgentPlan | None = None
        self._need_launch = False
        self._launch_sent = False
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connected = asyncio.Event()
        self._forwards = PortForwards()
        self._forward_lock = asyncio.Lock()
        self._task: asyncio.Task[StopReason] | None = None
        self._started: asyncio.Future[int] | None = None
        self._closing = False
        self._attempts = 0
        self._stdout = LineAssembler("stdout", 0, settings.max_line_bytes, self._redact)
        self._stderr = LineAssembler("stderr", 0, settings.max_line_bytes, self._redact)

    # ---- public API -------------------------------------------------------------------

    @property
    def positions(self) -> LogPositions:
        """Byte positions up to which the agent's lines were delivered."""
        return LogPositions(stdout=self._stdout.position, stderr=self._stderr.position)

    @property
    def target(self) -> str:
        return f"{self.endpoint.host}:{self.endpoint.port}"

    async def start_agent(
        self,
        agent_path: str | Path,
        env: Mapping[str, str],
        remote_dir: str,
        *,
        resume: LogPositions | None = None,
    ) -> int:
        """Reach the node, upload and start the agent detached; its pid once it runs.

        With `resume` (re-attach after a restart), the agent already running in `remote_dir`
        is followed from those positions; it is launched only if none runs there. The retry
        loop keeps running after this returns; failures that end it raise here when they
        come first, else they are `failure` and a `SessionStopped` event. Whatever happens
        (even if this call is cancelled), `close()` ends the loop and stops the agent.
        """
        if self._task is not None:
            raise RuntimeError("start_agent may be called once per session")
        self._plan = make_plan(agent_path, env, remote_dir)
        self._need_launch = resume is None
        if resume is not None:
            self._stdout.position, self._stderr.position = resume.stdout, resume.stderr
        self._started = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._supervise(), name=f"ssh-session {self.lease_key}")
        waiters: set[asyncio.Future[Any]] = {self._started, self._task}
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if self._started.done():
            return self._started.result()
        raise self._failure_or_stop()

    async def forward(self, remote_port: int, local_port: int = 0) -> int:
        """Carry 127.0.0.1:local_port (0 = pick a free one) to the node's 127.0.0.1:remote_port;
        the local port, kept across reconnects until `close()`."""
        forward = self._forwards.add(remote_port, local_port)
        conn = await self._wait_connection()
        try:
            return await self._bind(conn, forward)
        except (OSError, asyncssh.Error) as error:
            self._forwards.remove(forward)
            raise SshError(
                f"cannot forward 127.0.0.1:{local_port or '(any)'} to port {remote_port} on "
                f"lease {self.lease_key}'s node: {self._one_line(str(error))}",
                fix="pick another local port, or check the node serves on that port",
            ) from None

    async def send_control(self, line: str) -> bool:
        """One control line (heartbeat, detach, attach or shutdown) to the running agent's
        control fifo, through the session's current connection. True once written; False
        when there is no live connection, no running agent, or the write failed or timed
        out (never raises, but ValueError for any other word)."""
        word = line.strip()
        if word not in CONTROL_WORDS:
            raise ValueError(
                f"control line {line!r} is not one of {', '.join(sorted(CONTROL_WORDS))}"
            )
        plan, conn = self._plan, self._conn
        if plan is None or conn is None or not self._connected.is_set() or conn.is_closed():
            return False
        command = shlex.join(["sh", "-c", _SEND_CONTROL, "sh", plan.remote_dir, word])
        try:
            done = await conn.run(command, check=False, timeout=self.settings.connect_timeout)
        except (OSError, asyncssh.Error, TimeoutError) as error:
            self._line(f"control line {word} not sent: {self._one_line(str(error))}")
            return False
        if done.exit_status != 0:
            self._line(f"control line {word} not sent: no agent running in {plan.remote_dir}")
            return False
        return True

    async def run_in_run_dir(self, command: str, within_s: float) -> int | None:
        """Run the user's `command` once on the node, in the agent's run directory with the
        agent's environment (`[vastai] bootstrap_command`); its output becomes provider
        lines. The exit status, or None when it could not run or finish within `within_s`."""
        plan = self._plan
        if plan is None:
            raise RuntimeError("start_agent first: the session has no run directory")
        conn = await self._wait_connection()
        script = f'cd "$1" && exec sh ./{RUN_NAME} {EXEC_FLAG} "$2"'
        full = shlex.join(["sh", "-c", script, "sh", plan.remote_dir, command])
        try:
            done = await conn.run(full, check=False, timeout=within_s)
        except (OSError, asyncssh.Error, TimeoutError) as error:
            self._line(f"bootstrap command did not finish: {self._one_line(str(error))}")
            return None
        for name, output in (("stdout", done.stdout), ("stderr", done.stderr)):
            text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
            for line in (text or "").splitlines():
                self._line(f"bootstrap command {name}: {line}")
        return done.exit_status

    async def wait(self) -> StopReason:
        """Until the retry loop ends (agent exited after ready, a give-up, or close)."""
        if self._task is None:
            raise RuntimeError("the session was not started")
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._task)
        return self.stop_reason or StopReason.CLOSED

    async def close(self, shutdown_agent: bool = True) -> AgentStop:
        """Stop the retry loop, stop the agent (`shutdown`, then SIGTERM, then SIGKILL),
        close the forwards and the connection. The caller destroys the lease next."""
        self._closing = True
        await self._end_task()
        agent = await self._stop_agent() if shutdown_agent else AgentStop.LEFT_RUNNING
        await self._forwards.close()
        await self._drop_connection()
        if self.stop_reason is None:
            self._stopped(StopReason.CLOSED)
        self._emit(SessionClosed(lease_key=self.lease_key, agent=agent))
        self._line(f"ssh session to lease {self.lease_key} closed; agent {agent.value}")
        return agent

    # ---- the retry loop ------------------------------------------------------------------

    async def _supervise(self) -> StopReason:
        """The retry loop, ended visibly (never silently) should a bug break it."""
        try:
            return await self._retry()
        except Exception as error:
            _log.exception("ssh session to lease %s failed", self.lease_key)
            self.failure = SshError(
                f"ssh session to lease {self.lease_key} failed: {type(error).__name__}: "
                f"{self._one_line(str(error))}",
                fix="this is a bug in mvp-tui; the log has the traceback",
            )
            self._stopped(StopReason.INTERNAL_ERROR, str(self.failure))
            return StopReason.INTERNAL_ERROR

    async def _retry(self) -> StopReason:
        """Attempt, classify, back off, until ready-and-closed or a reason to give up."""
        settings = self.settings
        backoff = Backoff(settings.backoff_initial, settings.backoff_factor, settings.backoff_cap)
        phase = Phase.BOOTSTRAP
        window_start = self._clock()
        # A host whose sshd never answers is given up after the boot budget, not after
        # the whole ready window.
        reach_by = None if settings.reach_timeout is None else window_start + settings.reach_timeout
        reached = False
        strikes = refusals = 0
        while True:
            if phase is Phase.BOOTSTRAP and self.ready.is_set():
                phase, window_start = self._serving(backoff)
            deadline = window_start + self._window(phase)
            self._attempts += 1
            self._line(
                f"ssh attempt {self._attempts} to {self.endpoint.user}@{self.target} "
                f"({phase.value})"
            )
            result = await self._attempt(phase, deadline)
            reached = reached or result.connected
            if result.host_key is not None:
                return self._give_up(StopReason.HOST_KEY_CHANGED, result, result.host_key)
            refusals = refusals + 1 if result.outcome is AttemptOutcome.AUTH_FAILED else 0
            if refusals >= settings.auth_attempts:
                return self._give_up(StopReason.AUTH_FAILED, result, self._auth_error(result))
            local = result.outcome is AttemptOutcome.LOCAL_FAILURE and not self._proxied
            banner = local and await ssh_banner(
                self.endpoint.host, self.endpoint.port, settings.banner_timeout
            )
            strikes = strikes_after(
                strikes, banner=banner, local_failure=result.outcome is AttemptOutcome.LOCAL_FAILURE
            )
            if strikes >= settings.local_strikes:
                return self._give_up(StopReason.LOCAL_PROBLEM, result, self._local_error(result))
            if result.outcome is AttemptOutcome.IMAGE_UNFIT:
                return self._give_up(StopReason.IMAGE_UNFIT, result, self._unfit_error(result))
            if result.outcome is AttemptOutcome.AGENT_EXITED and self.ready.is_set():
                self._attempt_event(result, None, phase)
                self._stopped(StopReason.AGENT_EXITED, result.detail)
                return StopReason.AGENT_EXITED
            if phase is Phase.BOOTSTRAP and self.ready.is_set():
                phase, window_start = self._serving(backoff)
                deadline = window_start + self._window(phase)
            elif phase is Phase.SERVING and result.connected:
                backoff.reset()  # a connection that worked: start patient again
                window_start = self._clock()
                deadline = window_start + self._window(phase)
            remaining = deadline - self._clock()
            if reach_by is not None and not reached and phase is Phase.BOOTSTRAP:
                remaining = min(remaining, reach_by - self._clock())
                if remaining <= 0:
                    return self._give_up(StopReason.TIMED_OUT, result, self._reach_error(result))
            if remaining <= 0:
                return self._give_up(
                    StopReason.TIMED_OUT, result, self._timeout_error(phase, result)
                )
            port_not_up = self._port_not_up(result, phase, reached) and not self._proxied
            if port_not_up and await self._await_port(result, remaining):
                continue  # sshd answers now: log in at once, not after a back-off
            delay = min(backoff.next_delay(), remaining)
            self._attempt_event(result, delay, phase)
            self._line(
                f"ssh attempt {self._attempts}: {result.outcome.value}: {result.detail}; "
                f"retrying in {delay:g}s"
            )
            await self._sleep(delay)

    @staticmethod
    def _port_not_up(result: AttemptResult, phase: Phase, reached: bool) -> bool:
        """A first login that failed the way a node still booting fails: nothing listening,
        or a port (Vast's proxy) that takes the connection but has no sshd behind it yet."""
        return phase is Phase.BOOTSTRAP and not reached and result.outcome in _PORT_OUTCOMES

    async def _await_port(self, result: AttemptResult, within: float) -> bool:
        """Probe sshd's banner about once a second until it answers; True once it did after
        at least one silent probe (the login should follow at once). False when it answered
        the first probe (sshd is up and the login failed anyway: that is for the back-off)
        or when `within` ran out."""
        interval = self.settings.port_probe_interval
        probe = min(interval, self.settings.banner_timeout)
        host, port = self.endpoint.host, self.endpoint.port
        answered = await ssh_banner(host, port, probe)
        if answered and result.outcome is not AttemptOutcome.NOT_LISTENING:
            return False
        self._attempt_event(result, 0.0 if answered else interval, Phase.BOOTSTRAP)
        self._line(
            f"ssh attempt {self._attempts}: {result.outcome.value}: {result.detail}; "
            + ("sshd answers now: logging in" if answered else
               f"waiting for sshd (its banner probed every {interval:g}s)")
        )
        if answered:
            return True  # it came up just after the attempt
        until = self._clock() + within
        while self._clock() < until:
            started = self._clock()
            if await ssh_banner(host, port, min(probe, max(until - started, 0.01))):
                return True
            # The wait between probes of a port: the pace of polling, not a back-off.
            await self._sleep(
                max(0.0, min(interval - (self._clock() - started), until - self._clock()))
            )
        return False

    def _window(self, phase: Phase) -> float:
        if phase is Phase.BOOTSTRAP:
            return self.settings.ready_timeout
        return self.settings.reconnect_timeout

    def _serving(self, backoff: Backoff) -> tuple[Phase, float]:
        """Ready was signalled: from now on retries only keep the connection up."""
        backoff.reset()
        self._emit(BootstrapReady(lease_key=self.lease_key, attempts=self._attempts))
        self._line(f"bootstrap of lease {self.lease_key} ready after {self._attempts} attempt(s)")
        return Phase.SERVING, self._clock()

    async def _attempt(self, phase: Phase, deadline: float) -> AttemptResult:
        """Connect; then upload and launch (or re-follow) the agent and stream its lines."""
        try:
            conn, check = await open_connection(
                self.endpoint, self.identity, self.pins, self.lease_key, self.settings,
                awaiting_pin=self._awaiting_pin,
            )
        except ConnectFailed as failed:
            return AttemptResult(
                failed.outcome,
                self._one_line(failed.detail),
                host_key=failed.host_key,
            )
        self._conn = conn
        verified = self._awaiting_pin and check.seen is not None
        self._awaiting_pin = False  # the pinned key answered: from now on a change is a change
        if (check.pinned_now or verified) and check.seen is not None:
            fingerprint = fingerprint_of(check.seen)
            self._emit(HostKeyPinned(lease_key=self.lease_key, fingerprint=fingerprint,
                                     before_create=verified))
            how = "pinned before create, presented by the node" if verified else "pinned"
            self._line(f"host key {fingerprint} {how} for lease {self.lease_key}")
        if verified and self._rotate is not None:
            await self._rotate_host_key(conn, self._rotate)
        connected = AttemptResult(AttemptOutcome.CONNECTED, "", connected=True)
        self._attempt_event(connected, None, phase)
        self._line(f"ssh attempt {self._attempts}: connected to {self.target}")
        self._connected.set()
        try:
            await self._restore_forwards(conn)
            result = await self._run_node(conn, deadline)
            return AttemptResult(result.outcome, self._redact(result.detail), connected=True)
        finally:
            self._connected.clear()
            if not self._closing:
                await self._drop_connection()

    async def _rotate_host_key(
        self, conn: asyncssh.SSHClientConnection, place: RotationPlace
    ) -> None:
        """Once per session, over the connection that just verified the pinned key."""
        self._rotate = None
        before = self.pins.get(self.lease_key)
        rotated = await rotate_host_key(
            conn, place, self.pins, self.lease_key, self._confirm_key,
            run_timeout_s=self.settings.connect_timeout,
        )
        self._line(f"{rotated.detail} for lease {self.lease_key}")
        if rotated.new is not None:
            self._emit(HostKeyPinned(
                lease_key=self.lease_key, fingerprint=fingerprint_of(rotated.new),
                rotated_from=fingerprint_of(before) if before else "",
            ))

    async def _confirm_key(self) -> str | None:
        """The key a fresh connection (the session's own path) was accepted with, or None."""
        try:
            conn, check = await open_connection(
                self.endpoint, self.identity, self.pins, self.lease_key, self.settings
            )
        except ConnectFailed:
            return None
        conn.close()
        with contextlib.suppress(OSError, asyncssh.Error):
            await conn.wait_closed()
        return check.seen

    async def _run_node(self, conn: asyncssh.SSHClientConnection, deadline: float) -> AttemptResult:
        plan = self._plan
        assert plan is not None
        launch = self._need_launch
        command = follow_command(
            plan, self.positions, self.settings, launch=launch, wait_for_pid=self._launch_sent
        )
        try:
            process = await self._open_reader(conn, plan, command, launch)
        except asyncssh.ConnectionLost as error:
            return AttemptResult(AttemptOutcome.DROPPED, f"connection lost: {error}")
        except (OSError, asyncssh.Error) as error:
            return AttemptResult(
                AttemptOutcome.COMMAND_FAILED,
                f"cannot set up the agent in {plan.remote_dir}: {self._one_line(str(error))}",
            )
        self._launch_sent = self._launch_sent or launch
        try:
            return await self._stream_until_end(process, deadline)
        finally:
            process.close()
            with contextlib.suppress(asyncssh.Error, OSError, TimeoutError):
                async with asyncio.timeout(self.settings.connect_timeout):
                    await process.wait_closed()

    async def _open_reader(
        self, conn: asyncssh.SSHClientConnection, plan: AgentPlan, command: str, launch: bool
    ) -> asyncssh.SSHClientProcess[bytes]:
        """The node-side reader's channel; when launching, opened while the files upload."""
        if not launch:
            return await conn.create_process(command, encoding=None)
        opening = asyncio.ensure_future(conn.create_process(command, encoding=None))
        try:
            method = await upload(conn, plan)
        except BaseException:
            opening.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError, asyncssh.Error):
                (await opening).close()
            raise
        process = await opening
        if method is UploadMethod.EXEC:
            self._line("the node's sshd offers no sftp subsystem: files sent through `cat`")
        process.stdin.write(GO_LINE)
        return process

    async def _stream_until_end(
        self, process: asyncssh.SSHClientProcess[bytes], deadline: float
    ) -> AttemptResult:
        """Deliver the agent's lines until the stream ends; before ready, not past `deadline`."""
        pump = asyncio.create_task(self._pump(process), name=f"ssh-lines {self.lease_key}")
        try:
            while not pump.done():
                if self.ready.is_set():
                    await asyncio.wait({pump})
                    break
                ready = asyncio.create_task(self.ready.wait())
                try:
                    await asyncio.wait(
                        {pump, ready},
                        timeout=max(0.0, deadline - self._clock()),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    ready.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await ready
                if not pump.done() and not self.ready.is_set():
                    return AttemptResult(
                        AttemptOutcome.TIMED_OUT,
                        f"the agent did not report ready within {self.settings.ready_timeout:g}s",
                    )
            return pump.result()
        finally:
            if not pump.done():
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump

    async def _pump(self, process: asyncssh.SSHClientProcess[bytes]) -> AttemptResult:
        """Frames from the node-side reader to lines, pid and exit events."""
        try:
            while True:
                frame = await read_frame(process.stdout)
                if frame is None:
                    break
                result = self._apply(frame)
                if result is not None:
                    return result
        except FrameError as error:
            return AttemptResult(AttemptOutcome.COMMAND_FAILED, str(error))
        except (OSError, asyncssh.Error) as error:
            self._discard_partials()
            return AttemptResult(AttemptOutcome.DROPPED, self._one_line(str(error)))
        self._discard_partials()
        return await self._reader_ended(process)

    def _apply(self, frame: HelperFrame) -> AttemptResult | None:
        """One frame; a result when it ends the stream (the agent exited)."""
        if frame.kind is FrameKind.STDOUT:
            self._stdout.feed(frame.payload, self._on_node_line)
        elif frame.kind is FrameKind.STDERR:
            self._stderr.feed(frame.payload, self._on_node_line)
        elif frame.kind is FrameKind.PID:
            self._agent_running(int(frame.payload))
        else:
            return self._agent_exited(frame.payload)
        return None

    def _agent_running(self, pid: int) -> None:
        resumed = not self._need_launch
        self._need_launch = False
        if pid != self.agent_pid:
            self.agent_pid = pid
            assert self._plan is not None
            self._emit(
                AgentStarted(
                    lease_key=self.lease_key,
                    pid=pid,
                    remote_dir=self._plan.remote_dir,
                    resumed=resumed,
                )
            )
            verb = "followed" if resumed else "started"
            self._line(f"agent {verb} on lease {self.lease_key}: pid {pid}")
        if self._started is not None and not self._started.done():
            self._started.set_result(pid)

    def _agent_exited(self, payload: bytes) -> AttemptResult:
        self._stdout.flush(self._on_node_line)
        self._stderr.flush(self._on_node_line)
        code = int(payload) if payload.strip(b"-").isdigit() else None
        before_ready = not self.ready.is_set()
        self._need_launch = before_ready  # before ready: the next attempt starts it again
        self._emit(AgentExited(lease_key=self.lease_key, exit_code=code, before_ready=before_ready))
        when = "before ready" if before_ready else "after ready"
        return AttemptResult(
            AttemptOutcome.AGENT_EXITED,
            f"the agent exited {when} with code {'unknown' if code is None else code}",
        )

    async def _reader_ended(self, process: asyncssh.SSHClientProcess[bytes]) -> AttemptResult:
        """The reader's channel closed without an exit frame: a drop, or the reader failed."""
        with contextlib.suppress(asyncssh.Error, OSError, TimeoutError):
            async with asyncio.timeout(self.settings.connect_timeout):
                await process.wait_closed()
        status = process.exit_status
        if status is None or status == follow.EXIT_OK:
            return AttemptResult(AttemptOutcome.DROPPED, "the connection to the node was lost")
        with contextlib.suppress(asyncssh.Error, OSError, TimeoutError):
            async with asyncio.timeout(1.0):
                err = await process.stderr.read(4096)
        text = self._one_line(err.decode("utf-8", "replace")) if err else ""
        if status == follow.EXIT_NO_PYTHON:
            return AttemptResult(AttemptOutcome.IMAGE_UNFIT, text or "this image lacks python3")
        if status == follow.EXIT_NO_AGENT:
            self._need_launch = True
            return AttemptResult(AttemptOutcome.COMMAND_FAILED, f"no agent running: {text}")
        return AttemptResult(
            AttemptOutcome.COMMAND_FAILED, f"the node-side reader exited with {status}: {text}"
        )

    def _discard_partials(self) -> None:
        self._stdout.discard_partial()
        self._stderr.discard_partial()

    # ---- port forwards ------------------------------------------------------------------

    async def _restore_forwards(self, conn: asyncssh.SSHClientConnection) -> None:
        for forward in self._forwards.all:
            try:
                await self._bind(conn, forward)
            except (OSError, asyncssh.Error) as error:
                self._line(
                    f"port forward 127.0.0.1:{forward.local_port} -> node port "
                    f"{forward.remote_port} not restored: {self._one_line(str(error))}"
                )

    async def _bind(self, conn: asyncssh.SSHClientConnection, forward: Forward) -> int:
        async with self._forward_lock:
            if forward.conn is conn and forward.listener is not None:
                return forward.local_port
            port = await self._forwards.bind(conn, forward)
        self._emit(
            PortForwarded(
                lease_key=self.lease_key, local_port=port, remote_port=forward.remote_port
            )
        )
        self._line(f"port forward 127.0.0.1:{port} -> node port {forward.remote_port}")
        return port

    async def _wait_connection(self) -> asyncssh.SSHClientConnection:
        """The live connection, waiting for a reconnect; raises when the loop has ended."""
        if self._task is None:
            raise RuntimeError("start_agent first: the session has no connection")
        while True:
            if self._connected.is_set() and self._conn is not None:
                return self._conn
            if self._task.done():
                raise self._failure_or_stop()
            connected = asyncio.create_task(self._connected.wait())
            try:
                await asyncio.wait({connected, self._task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                connected.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await connected

    # ---- teardown -----------------------------------------------------------------------

    async def _end_task(self) -> None:
        task = self._task
        if task is None:
            return
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _stop_agent(self) -> AgentStop:
        """`shutdown`, then SIGTERM, then SIGKILL, on the node (through a fresh connection
        when the session's is down)."""
        plan = self._plan
        if plan is None or (not self._launch_sent and self.agent_pid is None):
            return AgentStop.NOT_STARTED
        conn = self._conn
        if conn is None or conn.is_closed():
            await self._drop_connection()
            try:
                conn, _ = await open_connection(
                    self.endpoint, self.identity, self.pins, self.lease_key, self.settings
                )
            except ConnectFailed as failed:
                self._line(f"cannot reach the node to stop the agent: {failed.detail}")
                return AgentStop.UNREACHABLE
            self._conn = conn
        budget = self.settings.shutdown_grace * 4 + self.settings.connect_timeout
        try:
            done = await conn.run(stop_command(plan, self.settings), check=False, timeout=budget)
        except (OSError, asyncssh.Error, TimeoutError) as error:
            self._line(f"cannot stop the agent: {self._one_line(str(error))}")
            return AgentStop.UNREACHABLE
        word = str(done.stdout or "").strip()
        stop = _STOP_WORDS.get(word)
        if stop is None:
            self._line(
                f"stopping the agent failed (exit {done.exit_status}): "
                f"{self._one_line(str(done.stderr or ''))}"
            )
            return AgentStop.UNREACHABLE
        return stop

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(asyncssh.Error, OSError, TimeoutError):
                async with asyncio.timeout(self.settings.connect_timeout):
                    await conn.wait_closed()

    # ---- outcomes, events, lines ---------------------------------------------------------

    def _give_up(self, reason: StopReason, result: AttemptResult, error: SshError) -> StopReason:
        self._attempt_event(result, None, None)
        self.failure = error
        self._stopped(reason, str(error))
        self._line(f"ssh bootstrap of lease {self.lease_key} stopped: {error}")
        return reason

    def _stopped(self, reason: StopReason, detail: str = "") -> None:
        self.stop_reason = reason
        self._emit(
            SessionStopped(
                lease_key=self.lease_key,
                reason=reason,
                detail=one_line_ascii(detail, _LINE_CHARS, redact=self._redact),
            )
        )

    def _failure_or_stop(self) -> SshError:
        if self.failure is not None:
            return self.failure
        reason = self.stop_reason or StopReason.CLOSED
        return SshError(f"ssh session to lease {self.lease_key} ended: {reason.value}")

    def _auth_error(self, result: AttemptResult) -> AuthFailed:
        return AuthFailed(
            f"lease {self.lease_key}: {self.endpoint.user}@{self.target} refused our key "
            f"{self.identity.fingerprint} {self.settings.auth_attempts} times ({result.detail})",
            fix=f"check that {self.endpoint.user} is the node's login user ([vastai] ssh_user) "
            f"and that the provider account holds the public key of {self.identity.path}",
        )

    def _unfit_error(self, result: AttemptResult) -> ImageUnfit:
        return ImageUnfit(
            f"lease {self.lease_key}: {result.detail}",
            fix=f"pick an image that holds python3 (the default for rented nodes, "
            f"{RENTED_IMAGE}, does): [image] node or --image",
        )

    def _local_error(self, result: AttemptResult) -> LocalSshProblem:
        return LocalSshProblem(
            f"lease {self.lease_key}: the node's sshd at {self.target} answers, but our SSH "
            f"client failed {self.settings.local_strikes} times in a row ({result.detail}); "
            "no other node would do better",
            fix="check this machine's SSH setup (ssh-agent, key type, crypto libraries) and "
            "the asyncssh version",
        )

    def _reach_error(self, result: AttemptResult) -> BootstrapTimedOut:
        if result.outcome is AttemptOutcome.HOST_KEY_NOT_YET:
            return PinnedKeyNotServed(
                f"lease {self.lease_key}: the node at {self.target} never presented the host "
                f"key pinned for it within its boot budget of {self.settings.reach_timeout:g} s "
                f"({result.detail}); its start command did not install it before sshd served",
                fix=PINNED_KEY_FIX,
            )
        return BootstrapTimedOut(
            f"lease {self.lease_key}: SSH at {self.target} did not answer within its boot "
            f"budget of {self.settings.reach_timeout:g} s ({self._attempts} attempt(s); last: "
            f"{result.outcome.value} {result.detail})",
            fix="nothing to fix here if other hosts answer: this host is slow or broken; "
            "raise [ssh] ready_timeout_secs (the budget's cap) or [image] size_gb for a big image",
        )

    def _timeout_error(self, phase: Phase, result: AttemptResult) -> BootstrapTimedOut:
        if phase is Phase.BOOTSTRAP:
            return BootstrapTimedOut(
                f"lease {self.lease_key}: not ready within {self.settings.ready_timeout:g}s "
                f"after {self._attempts} attempt(s); last: {result.outcome.value} {result.detail}",
                fix="raise the ready timeout, or pick another offer (the node may be slow)",
            )
        return BootstrapTimedOut(
            f"lease {self.lease_key}: no connection again within "
            f"{self.settings.reconnect_timeout:g}s; last: {result.outcome.value} {result.detail}",
            fix="check the node in the provider's console; tear the lease down if it is gone",
        )

    def _attempt_event(
        self, result: AttemptResult, next_try: float | None, phase: Phase | None
    ) -> None:
        self.last_outcome = result.outcome
        self._emit(
            SshAttempt(
                lease_key=self.lease_key,
                attempt=self._attempts,
                target=self.target,
                outcome=result.outcome,
                detail=one_line_ascii(result.detail, _LINE_CHARS, redact=self._redact),
                next_try_s=next_try,
                phase=phase or (Phase.SERVING if self.ready.is_set() else Phase.BOOTSTRAP),
            )
        )

    def _emit(self, event: EngineEvent) -> None:
        self._sink(_stamped(event, self._wall()))

    def _one_line(self, text: str) -> str:
        """Node or library text as one short line: the run's secrets redacted, then cut (a
        secret cut first would keep its prefix)."""
        return one_line_ascii(text, redact=self._redact)

    def _line(self, text: str) -> None:
        self._on_provider_line(one_line_ascii(text, _LINE_CHARS, redact=self._redact))


def _stamped(event: EngineEvent, at: float) -> EngineEvent:
    return dataclasses.replace(event, at=at)

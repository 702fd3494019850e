"""The node link of a run (`NodeLink`): bring-up from a running lease to a node whose engine
answers, over SSH (rented nodes: session, agent, bootstrap command, port forward,
heartbeats) or as a local child process, with the lease watched all along; the endpoint
record; and the session's end (the agent stopped, or left detached, its log mark kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.frame import node_stream
from mvp_tui.engine.attempt_stage import AttemptStage
from mvp_tui.engine.cluster import Cluster
from mvp_tui.engine.context import RunContext, RunLeases
from mvp_tui.engine.events import (
    EndpointReady,
    NodeFailed,
    NodeReady,
    StageBudget,
)
from mvp_tui.engine.failures import (
    AGENT_PHASE_STAGES,
    AttemptFailed,
    AttemptFailure,
    FailureScope,
    RunFailed,
    Stage,
    boot_budget_s,
    ssh_failure,
)
from mvp_tui.engine.orch import run_number
from mvp_tui.engine.run_core import NodeVerdicts, local_port_free, unless
from mvp_tui.engine.watchdog import UNPROVEN_WORDS, switch_refusal
from mvp_tui.lease.endpoint_record import (
    EndpointRecord,
    save_endpoint,
)
from mvp_tui.lease.port_owner import port_owner
from mvp_tui.lease.records import AgentLogMark, LeaseRecord
from mvp_tui.lease.walk_texts import api_failing
from mvp_tui.node_protocol import WEIGHTS_CHANNEL, AgentEnv, RoleEnv
from mvp_tui.providers.base import LeaseState, ProviderError
from mvp_tui.providers.vastai.host_key import (
    SSH_DIR_DEFAULT,
    SSH_DIR_ENV,
    SSHD_PIDFILE_DEFAULT,
    SSHD_PIDFILE_ENV,
)
from mvp_tui.ssh.errors import PINNED_KEY_FIX, SshError
from mvp_tui.ssh.events import AgentExited, AttemptOutcome
from mvp_tui.ssh.logtail import LogPositions
from mvp_tui.ssh.settings import SshSettings
from mvp_tui.untrusted import one_line_ascii

if TYPE_CHECKING:  # asyncssh loads only when a node is reached over SSH
    from mvp_tui.ssh.host_key_rotation import RotationPlace
    from mvp_tui.ssh.session import NodeSession


_NOT_YET = AttemptOutcome.HOST_KEY_NOT_YET


@dataclasses.dataclass(eq=False)
class NodeLink:
    """The link to the run's node: its SSH session (rented nodes) or child process (local),
    the agent and bootstrap command on it, the wait for its engine, the port forward and
    the endpoint record, heartbeats while attached, and the session's end (the agent
    stopped, or left detached with its log position marked for a re-attach)."""

    ctx: RunContext
    leases: RunLeases
    verdicts: NodeVerdicts
    attempt: AttemptStage
    cluster: Cluster
    # Its own state, None until it has some.
    endpoint: EndpointRecord | None = dataclasses.field(default=None, init=False)
    local_url: str | None = dataclasses.field(default=None, init=False)
    session: NodeSession | None = dataclasses.field(default=None, init=False)  # SSH nodes only
    # A multi-node run's rented workers.
    worker_sessions: list[NodeSession] = dataclasses.field(default_factory=list, init=False)
    # [ssh] debug's log, while on.
    _ssh_debug_stop: Callable[[], None] | None = dataclasses.field(default=None, init=False)
    # A re-attach follows the agent's logs from here.
    _resume: LogPositions | None = dataclasses.field(default=None, init=False)
    # Kept across nodes: clients keep their address.
    _openai_port: int | None = dataclasses.field(default=None, init=False)

    def forget_node(self) -> None:
        """The next attempt's node has no URL yet."""
        self.local_url = None

    def adopt(self, endpoint: EndpointRecord | None, lease: LeaseRecord) -> None:
        """An earlier run's node: its endpoint record, and its agent's logs followed from
        where that run stopped reading them."""
        self.endpoint = endpoint
        # Resume the agent's logs where the earlier run stopped reading them; the engine
        # verdict it had seen is replayed, as the lines before that point are not re-read.
        mark = lease.log_positions
        self._resume = LogPositions(mark.stdout, mark.stderr) if mark else LogPositions()
        if mark is not None and lease.ready_record is not None:
            self.ctx.hub.publish(
                WEIGHTS_CHANNEL, lease.ready_record.encode(), stream=self.ctx.bridge.stream
            )

    async def bring_up(self, timeout_s: float | None = None) -> NodeReady:
        """Start the node agent (over SSH for rented nodes) and wait for its engine, while
        the provider is watched: an instance that exits ends the attempt within a poll or
        two. Every failure is an `AttemptFailed` saying where and whether another host
        could do better."""
        lease = self.leases.require()
        timeout = timeout_s if timeout_s is not None else self.ctx.settings.ssh.ready_timeout
        self.attempt.reach(Stage.SSH if self.ctx.provider.info.ssh else Stage.AGENT)
        # The whole bring-up's cap, shown on the last row (the SSH row gets its own budget).
        self.ctx.emit(StageBudget(at=self.ctx.clock(), run_id=self.ctx.run_id,
                                  stage=Stage.ENGINE.value, budget_s=round(timeout, 1)))
        try:
            async with asyncio.timeout(timeout):
                await unless(self._start_node(lease), self.watch_lease(bringing_up=True))
        except TimeoutError:
            unreached = self.attempt.stage is Stage.SSH  # its sshd never let us in
            kind = "ssh_unreachable" if unreached else "not_ready"
            reason = f"the node's engine was not ready within {timeout:g} s (it got to: "
            reason += f"{self.attempt.stage.value})"
            fix = "raise [ssh] ready_timeout_secs, or read the node's channels for why"
            session = self.session
            if unreached and session is not None and session.last_outcome is _NOT_YET:
                kind = "host_key_not_pinned"  # it answered, never with the key pinned for it
                reason = (
                    f"the node never presented the host key pinned for it before create "
                    f"within {timeout:g} s: its start command did not install it before sshd "
                    "served (nothing was sent to it)"
                )
                fix = PINNED_KEY_FIX
            raise self.attempt_failed(
                AttemptFailure(self.attempt.stage, FailureScope.HOST, kind, reason, fix)
            ) from None
        except SshError as exc:
            raise self.attempt_failed(ssh_failure(exc, self.attempt.stage)) from None
        if self.verdicts.watch.fatal is not None:
            raise self.attempt_failed(self._fatal_failure())
        loaded = self.verdicts.watch.loaded
        assert loaded is not None
        try:
            self.local_url = await self._local_url(loaded.base_url, loaded.port)
        except SshError as exc:
            raise self.attempt_failed(ssh_failure(exc, Stage.ENGINE)) from None
        self.attempt.reach(Stage.SERVING)
        self.attempt.journal(None)
        self.keep_endpoint(serving=True)
        ready = NodeReady(
            at=self.ctx.clock(),
            run_id=self.ctx.run_id,
            model_id=loaded.model_id,
            engine=loaded.engine,
            local_url=self.local_url,
            load_ms=loaded.load_ms,
        )
        self.ctx.emit(ready)
        self.ctx.emit(self.attempt.ready_summary(ready.at))
        endpoint = self.endpoint
        if endpoint is not None:
            self.ctx.emit(
                EndpointReady(
                    at=self.ctx.clock(),
                    run_id=self.ctx.run_id,
                    base_url=endpoint.base_url,
                    model=endpoint.model,
                    auth=endpoint.auth,
                    idle_stop_mins=endpoint.idle_stop_mins,
                    slots=endpoint.slots,
                    port_taken=self.ctx.port_taken,
                    port_owner=(
                        port_owner(self.ctx.port_taken, self.ctx.config.state_dir)
                        if self.ctx.port_taken else ""
                    ),
                )
            )
        return ready

    def keep_endpoint(self, *, serving: bool) -> None:
        """The run's endpoint record: its key before the agent starts, its address once the
        node serves. A record that cannot be written is said, not fatal (prompts still work;
        only a re-attach and `mvp-tui endpoint` need it)."""
        loaded = self.verdicts.watch.loaded if serving else None
        endpoint = self.endpoint or EndpointRecord(
            api_key=self.ctx.api_key, idle_stop_mins=self.ctx.watchdog.idle_stop_mins
        )  # the idle stop asked for, until the node says what it armed
        endpoint.api_key, endpoint.rpc_token = self.ctx.api_key, self.ctx.rpc_token
        if loaded is not None:
            endpoint.base_url = self.local_url or ""
            # The id this dashboard configured (and sent as MVP_MODEL_ID), never the node's
            # echo of it: `endpoint --env` prints it for a shell to evaluate.
            endpoint.model = self.ctx.settings.model.model_id or "model"
            endpoint.auth = loaded.auth
            endpoint.idle_stop_mins = loaded.idle_stop_mins
            endpoint.slots = loaded.slots
        endpoint.serving = serving
        self.endpoint = endpoint
        try:
            save_endpoint(self.ctx.store, self.ctx.run_id, endpoint)
        except (OSError, ValueError) as exc:
            self.ctx.log(f"the run's endpoint record could not be written: {exc}")

    async def _start_node(self, lease: LeaseRecord) -> None:
        self.keep_endpoint(serving=False)  # the key is on disk before any agent checks it
        if self.ctx.provider.info.ssh:
            await self._start_remote_agent(lease)
            self.attempt.reach(Stage.AGENT)
            await self._until_ready_or_session_ends()
        else:
            await self._until_ready_or_exit()

    async def watch_lease(self, *, bringing_up: bool = False) -> None:
        """Returns only by raising `AttemptFailed` when the provider says the lease's
        instance exited, stopped or is gone (polled at the provider's poll interval); waits
        for ever on a provider that does not bill (a local child is watched as a process).
        While `bringing_up`, reads failing `read_failure_limit` times in a row end the
        attempt too (a serving node is not given up for an API outage)."""
        lease = self.leases.lease_record
        if lease is None or not lease.provider_id or not self.ctx.provider.info.billing:
            await asyncio.Event().wait()
            return
        walk = self.ctx.walk_settings()  # its sleep too (tests and benches time it)
        failures = 0
        while True:
            await walk.sleep(walk.poll_interval_s)
            try:
                status = await self.ctx.provider.get(lease.provider_id)
            except ProviderError as exc:
                failures += 1  # transient, unless it goes on (seed 003 `Wait::Failed`)
                if bringing_up and failures >= walk.read_failure_limit:
                    failure = self._api_down(lease.provider_id, failures, exc)
                    raise self.attempt_failed(failure) from None
                continue
            failures = 0
            if status.state in (LeaseState.DEAD, LeaseState.STOPPED, LeaseState.GONE):
                raw = one_line_ascii(status.raw_state or status.state.value, 40)
                detail = one_line_ascii(status.detail, 200, redact=self.ctx.redactor)
                raise self.attempt_failed(
                    AttemptFailure(
                        self.attempt.stage,
                        FailureScope.HOST,
                        "instance_exited",
                        f"the provider says lease {lease.provider_id} is {raw}"
                        + (f": {detail}" if detail else ""),
                        "nothing to fix here: the host failed; another offer is tried",
                    )
                )

    def _api_down(self, provider_id: str, failures: int, error: ProviderError) -> AttemptFailure:
        """The provider's API failed `failures` reads in a row: the attempt ends now (its
        lease deleted as any failed attempt's, best effort) rather than after its budget;
        run-wide, since another offer would meet the same API."""
        last = one_line_ascii(str(error), 300, redact=self.ctx.redactor)
        reason, fix = api_failing(self.ctx.provider.info.name, provider_id, failures, last)
        return AttemptFailure(
            self.attempt.stage, FailureScope.RUN, "provider_api_failing", reason, fix
        )

    def _fatal_failure(self) -> AttemptFailure:
        fatal = self.verdicts.watch.fatal
        assert fatal is not None
        scope = FailureScope.RUN if fatal.scope == "run" else FailureScope.HOST
        stage = AGENT_PHASE_STAGES.get(fatal.phase, self.attempt.stage)
        return AttemptFailure(stage, scope, f"node_{fatal.phase or 'failed'}", fatal.reason,
                              fatal.fix)

    def attempt_failed(self, failure: AttemptFailure) -> AttemptFailed:
        failure = dataclasses.replace(
            failure, reason=self.ctx.redactor(failure.reason), fix=self.ctx.redactor(failure.fix)
        )
        self.ctx.emit(
            NodeFailed(at=self.ctx.clock(), run_id=self.ctx.run_id, reason=failure.reason,
                       fix=failure.fix)
        )
        return AttemptFailed(failure)

    async def _until_ready_or_exit(self) -> None:
        """A local node: its engine reports, or its agent process ends first (the seed's
        `Exited` before ready), which fails the bring-up at once instead of at the timeout."""
        ready = asyncio.ensure_future(self.verdicts.watch.ready.wait())
        exited = asyncio.ensure_future(self.agent_exit())
        try:
            await asyncio.wait({ready, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (ready, exited):
                task.cancel()
            await asyncio.gather(ready, exited, return_exceptions=True)
        if not self.verdicts.watch.ready.is_set() and exited.done() and not exited.cancelled():
            raise self.node_failed(
                f"the node's agent exited (code {exited.result()}) before it was ready",
                "read the node's stderr channel for why",
            )

    async def agent_exit(self) -> int | None:
        """Returns when a local node's agent process has ended on its own, after emitting
        `AgentExited` (the seed's `Exited` observation); waits forever when the provider
        cannot tell (rented nodes: the SSH session watches their agent)."""
        lease = self.leases.lease_record
        # A re-attached lease was not started by this process: its provider cannot watch it.
        adopted = self._resume is not None
        if self.ctx.provider.info.ssh or adopted or not lease or not lease.provider_id:
            await asyncio.Event().wait()
        assert lease is not None and lease.provider_id
        code = await self.ctx.provider.wait_exited(lease.provider_id)
        self.ctx.emit(
            AgentExited(
                at=self.ctx.clock(),
                lease_key=lease.provider_id,
                exit_code=code,
                before_ready=not self.verdicts.watch.ready.is_set(),
            )
        )
        return code

    async def _until_ready_or_session_ends(self) -> None:
        """The SSH retry loop gives up (host key changed, auth, timeout) or the engine
        reports: whichever comes first."""
        session = self.session
        assert session is not None
        no_verdict = asyncio.ensure_future(self.verdicts.verdict_wait.expired())
        waits: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(self.verdicts.watch.ready.wait()),
            asyncio.ensure_future(session.wait()),
        ]
        if self.ctx.watchdog.required:
            waits += [asyncio.ensure_future(self.verdicts.watchdog_failed.wait()), no_verdict]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in [*waits, no_verdict]:
                task.cancel()
            await asyncio.gather(*waits, no_verdict, return_exceptions=True)
        if (
            no_verdict.done()
            and not no_verdict.cancelled()
            and self.verdicts.watchdog_verdict is None
        ):
            self.ctx.emit(self.verdicts.no_verdict(no_verdict.result()))
        self.check_watchdog()
        if not self.verdicts.watch.ready.is_set():
            failure = session.failure
            raise (
                failure
                if failure is not None
                else SshError(
                    f"the SSH session to lease {session.lease_key} ended before the node was ready"
                )
            )

    def check_watchdog(self) -> None:
        """A node whose switch (or boot guard) cannot destroy its own instance is not run when
        the switch is required: the lease is torn down, and the message says why, how to opt
        out, and whether the run stops or walks on (`switch_refusal`)."""
        if not self.ctx.watchdog.required:
            return
        refuse = self.ctx.config.settings.limits.unproven_node_switch == "refuse"
        verdict = self.verdicts.watchdog_verdict
        refusal = switch_refusal(
            verdict, self.verdicts.boot_guard_verdict, refuse_unproven=refuse
        )
        if refusal is not None:
            raise self.attempt_failed(refusal)
        if verdict is not None and verdict.status == "ready" and verdict.destroy_proven is False:
            self.ctx.log(UNPROVEN_WORDS.format(provider=self.ctx.provider.info.name))

    async def keep_node_attached(self) -> None:
        """Heartbeats to the node's switch while this run is attached (at least four per
        silence window); runs until cancelled. Nothing to do without a silence limit."""
        every = self.ctx.watchdog.heartbeat_every_s
        if every is None or not self.ctx.provider.info.ssh:
            await asyncio.Event().wait()
            return
        while True:
            await asyncio.sleep(every)  # a timer, not a wait for something
            session = self.session
            if session is not None:
                await session.send_control("heartbeat")
            for worker in self.worker_sessions:  # each worker's switch hears the run too
                await worker.send_control("heartbeat")

    async def _start_remote_agent(self, lease: LeaseRecord) -> None:
        from mvp_tui.agent_bundle import agent_zip

        session = self._new_session(lease, self.verdicts.watch.ready)
        self.session = session
        remote_dir = self._remote_dir(lease)
        env = {**self.ctx.node_env,
               **self.ctx.watchdog.node_env(lease.running_at or self.ctx.clock())}
        if self.cluster.settings.multi:  # the main node of several: --rpc over tunnels
            secrets = self.cluster.tunnel_secrets(self.ctx.pins())
            # Never echoed back either.
            self.ctx.redactor.add(secrets.get(RoleEnv.env_name("tunnel_key")))
            env.update(self.cluster.main_env(), **secrets)
        await session.start_agent(agent_zip(), env, remote_dir, resume=self._resume)
        command = self.ctx.settings.runtime.bootstrap_command
        if command and self._resume is None:  # once per node: not again on a re-attach
            await self._run_bootstrap_command(session, command)

    def _remote_dir(self, lease: LeaseRecord) -> str:
        """The agent's directory on the node: the run's, and for a host that replaced
        another (same node id, an earlier lease that ran) its own, so a re-attach finds it
        from the record and no old agent's logs are read as the new one's."""
        base = f"{self.ctx.settings.runtime.node_dir.rstrip('/')}/{self.ctx.run_id}"
        with contextlib.suppress(Exception):  # no record yet: the first host
            leases = self.ctx.store.load(self.ctx.run_id).leases
            index = next(i for i, x in enumerate(leases) if x.label == lease.label)
            hosts = sum(1 for x in leases[:index] if x.node_id == lease.node_id and x.running_at)
            return base if hosts == 0 else f"{base}-host{hosts + 1}"
        return base

    async def start_worker(
        self, lease: LeaseRecord, role_env: Mapping[str, str], ready: asyncio.Event
    ) -> None:
        """A worker node of a multi-node run: its own session, agent and directory."""
        from mvp_tui.agent_bundle import agent_zip

        node = role_env.get(AgentEnv.env_name("node_id"), "")
        # Its own bridge: its frames carry its stream, and it writes no other node's channels.
        bridge = NodeBridge(self.ctx.hub, int(node),
                            node_stream(run_number(self.ctx.run_id), int(node)),
                            redactor=self.ctx.redactor, own_channels_only=True)
        session = self._new_session(lease, ready, bridge)
        self.worker_sessions.append(session)
        base = self.ctx.settings.runtime.node_dir.rstrip("/")
        remote_dir = f"{base}/{self.ctx.run_id}-node{node}"
        env = {**self.ctx.node_env, **role_env}
        env.update(self.ctx.watchdog.node_env(lease.running_at or self.ctx.clock()))
        await session.start_agent(agent_zip(), env, remote_dir)

    def _new_session(
        self, lease: LeaseRecord, ready: asyncio.Event, bridge: NodeBridge | None = None
    ) -> NodeSession:
        from mvp_tui.ssh.session import NodeSession

        if lease.ssh is None or lease.provider_id is None:
            raise self.node_failed("the lease has no SSH endpoint", "")
        if self.ctx.identity is None:  # prepare_ssh_identity runs before any lease is reached
            raise self.node_failed("no SSH identity was loaded for this run", "")
        self.start_ssh_debug_log()
        return NodeSession(
            lease.ssh,
            self.ctx.identity,
            self.ctx.pins(),
            lease.provider_id,
            self._ssh_settings(lease),
            self.ctx.sink,
            self.ctx.on_node_line if bridge is None else bridge.on_line,
            (bridge or self.ctx.bridge).feed_provider_line,
            ready=ready,
            redactor=self.ctx.redactor,
            # Pinned before create (Vast, RunPod): until it answers, another key is "not yet".
            awaiting_pin=lease.host_key is not None and self._resume is None,
            rotate=self._rotation_place() if self.ctx.provider.info.rotates_host_key else None,
        )

    def _rotation_place(self) -> RotationPlace:
        """Where the node keeps sshd's key and pid: the onstart's own env names and defaults
        (a test's loopback sshd is named in the engine's environment, as in the create's)."""
        from mvp_tui.ssh.host_key_rotation import RotationPlace

        env = self.ctx.environ
        return RotationPlace(
            ssh_dir=env.get(SSH_DIR_ENV, "") or SSH_DIR_DEFAULT,
            sshd_pidfile=env.get(SSHD_PIDFILE_ENV, "") or SSHD_PIDFILE_DEFAULT,
        )

    def start_ssh_debug_log(self) -> None:
        """[ssh] debug: asyncssh's debug log into the run's directory (the seed's `ssh -v`),
        from the first SSH session on (the run's record, and so its directory, exist then)."""
        if not self.ctx.config.settings.ssh.debug or self._ssh_debug_stop is not None:
            return
        from mvp_tui.ssh.debug_log import DEBUG_LOG_FILE, start_debug_log

        run_dir = self.ctx.store.run_dir(self.ctx.run_id)
        try:
            self._ssh_debug_stop = start_debug_log(run_dir, self.ctx.redactor)
        except OSError as exc:  # a diagnostic: the run goes on without it
            self.ctx.log(f"[ssh] debug: the SSH debug log could not be opened: {exc}")
            return
        where = run_dir / DEBUG_LOG_FILE
        self.ctx.log(f"[ssh] debug: the SSH client's debug log goes to {where}")

    def stop_ssh_debug_log(self) -> None:
        if self._ssh_debug_stop is not None:
            self._ssh_debug_stop()
            self._ssh_debug_stop = None

    def _ssh_settings(self, lease: LeaseRecord) -> SshSettings:
        """[ssh] for this lease: the wait for a first answer from its sshd is budgeted by the
        image's size and the offer's download bandwidth ([ssh] ready_timeout_secs caps it)."""
        ssh = self.ctx.settings.ssh
        offer = self.leases.offers.get(lease.offer_id or "")
        budget = boot_budget_s(
            ssh.ready_timeout,
            self.ctx.config.settings.image.size_gb,
            offer.down_mbps if offer is not None else 0.0,
        )
        self.ctx.emit(
            StageBudget(at=self.ctx.clock(), run_id=self.ctx.run_id, stage=Stage.SSH.value,
                        budget_s=round(budget, 1))
        )
        return dataclasses.replace(ssh, reach_timeout=budget)

    async def _run_bootstrap_command(self, session: NodeSession, command: str) -> None:
        """`[vastai] bootstrap_command`, after the agent is set up and started (the Vast seed ran
        it as the node's bootstrap; here the agent is that, and the command is the user's
        extra step). A failure fails the bring-up, which tears the lease down."""
        self.ctx.log("running [vastai] bootstrap_command on the node")
        code = await session.run_in_run_dir(command, self.ctx.settings.ssh.ready_timeout)
        if code != 0:
            raise self.attempt_failed(
                AttemptFailure(
                    Stage.AGENT,
                    FailureScope.RUN,
                    "bootstrap_command",
                    "[vastai] bootstrap_command "
                    + ("did not finish" if code is None else f"exited with status {code}"),
                    "fix the command (its output is on the node's provider channel), or unset "
                    "[vastai] bootstrap_command",
                )
            )
        self.ctx.log("[vastai] bootstrap_command finished (status 0)")

    async def _local_url(self, node_base_url: str, port: int) -> str:
        if not self.ctx.provider.info.ssh:
            if self.ctx.local_port_asked and port != self.ctx.local_port_asked:
                self.ctx.note_port_taken(self.ctx.local_port_asked)  # taken after the check: said
            return node_base_url
        assert self.session is not None
        # 0: any free port; a replaced node takes the port its predecessor had, so clients
        # pointed at it keep working.
        # A re-attach keeps the earlier run's address.
        earlier = self.endpoint.port if self.endpoint is not None else None
        wanted = self._openai_port or earlier or self.ctx.settings.prompt.openai_port
        if wanted and self._openai_port is None and not local_port_free(wanted):
            self.ctx.note_port_taken(wanted)  # said with the endpoint; another port serves
            wanted = 0
        local_port = await self.session.forward(port, wanted)
        self._openai_port = local_port
        return f"http://127.0.0.1:{local_port}"

    def node_failed(self, reason: str, fix: str) -> RunFailed:
        reason, fix = self.ctx.redactor(reason), self.ctx.redactor(fix)
        self.ctx.emit(NodeFailed(at=self.ctx.clock(), run_id=self.ctx.run_id, reason=reason,
                                 fix=fix))
        return RunFailed(reason, fix)

    async def close_session(self, shutdown_agent: bool = True) -> None:
        """End the SSH session; with `shutdown_agent` the agent and engine are stopped too
        (bounded: the lease is destroyed next, which ends them anyway)."""
        if self.endpoint is not None and self.endpoint.serving:
            self.keep_endpoint(serving=False)  # the forward ends with the session
        workers, self.worker_sessions = self.worker_sessions, []
        for worker in workers:  # a rented multi-node run's workers: stopped with the run
            if not shutdown_agent:  # kept: its silence switch stands down, as the main's
                await worker.send_control("detach")
            limit = worker.settings.connect_timeout + 2 * worker.settings.shutdown_grace + 5
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(worker.close(shutdown_agent=shutdown_agent), limit)
        session, self.session = self.session, None
        if session is None:
            return
        if not shutdown_agent:
            # Left running on purpose: the node's silence switch stands down (its deadline
            # stays), or it would destroy the lease the user chose to keep.
            if not await session.send_control("detach"):
                self.ctx.log(f"could not tell lease {session.lease_key}'s node to detach")
            await session.close(shutdown_agent=False)
            self._mark_agent_log(session.positions)
            return
        limit = session.settings.connect_timeout + 2 * session.settings.shutdown_grace + 5
        try:
            await asyncio.wait_for(session.close(shutdown_agent=True), limit)
        except TimeoutError:
            self.ctx.log(f"ssh close to lease {session.lease_key} gave up after {limit:g} s")

    def _mark_agent_log(self, positions: LogPositions) -> None:
        """Record where this run stopped reading the agent left running (with the engine
        verdict it saw), for a later re-attach to resume there."""
        lease = self.leases.lease_record
        if lease is None or lease.provider_id is None:
            return
        # The main node's verdict, not a worker's (every node writes this channel).
        frames = self.ctx.hub.tail(WEIGHTS_CHANNEL).frames
        verdict = [f for f in frames if f.stream == self.ctx.bridge.stream]
        ready = verdict[-1].payload.decode("utf-8", "replace") if verdict else None
        mark = AgentLogMark(positions.stdout, positions.stderr)
        self.ctx.store.mark_agent_log(self.ctx.run_id, lease.provider_id, mark, ready)
        lease.log_positions, lease.ready_record = mark, ready

"""The bring-up phase of a run: from a running lease to a node whose engine answers, over SSH
(rented nodes: session, agent, bootstrap command, port forward, heartbeats) or as a local
child process, with the lease watched all along; the host journal and ready summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.frame import node_stream
from mvp_tui.engine.events import (
    EndpointReady,
    NodeFailed,
    NodeReady,
    ReadySummary,
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
from mvp_tui.engine.ready_summary import stage_parts, summary_text
from mvp_tui.engine.run_core import RunCore, local_port_free, unless
from mvp_tui.engine.watchdog import UNPROVEN_WORDS, switch_refusal
from mvp_tui.engine.watchdog import no_verdict as silent
from mvp_tui.lease.endpoint_record import (
    EndpointRecord,
    save_endpoint,
)
from mvp_tui.lease.host_journal import HostJournal, HostOutcome, config_model_key, host_key
from mvp_tui.lease.record_pins import RecordPins
from mvp_tui.lease.records import LeaseRecord
from mvp_tui.providers.base import LeaseState, ProviderError
from mvp_tui.providers.prefetch import wants_prefetch
from mvp_tui.providers.vast_host_key import (
    SSH_DIR_DEFAULT,
    SSH_DIR_ENV,
    SSHD_PIDFILE_DEFAULT,
    SSHD_PIDFILE_ENV,
)
from mvp_tui.ssh.errors import PINNED_KEY_FIX, SshError
from mvp_tui.ssh.events import AgentExited, AttemptOutcome
from mvp_tui.ssh.settings import SshSettings
from mvp_tui.untrusted import one_line_ascii

if TYPE_CHECKING:  # asyncssh loads only when a node is reached over SSH
    from mvp_tui.ssh.host_key_rotation import RotationPlace
    from mvp_tui.ssh.session import NodeSession


_NOT_YET = AttemptOutcome.HOST_KEY_NOT_YET


class BringUpPhase(RunCore):
    """Bring-up: the node, agent and session steps."""

    async def bring_up(self, timeout_s: float | None = None) -> NodeReady:
        """Start the node agent (over SSH for rented nodes) and wait for its engine, while
        the provider is watched: an instance that exits ends the attempt within a poll or
        two. Every failure is an `AttemptFailed` saying where and whether another host
        could do better."""
        lease = self._require_lease()
        timeout = timeout_s if timeout_s is not None else self.settings.ssh.ready_timeout
        self.reach(Stage.SSH if self.provider.info.ssh else Stage.AGENT)
        # The whole bring-up's cap, shown on the last row (the SSH row gets its own budget).
        self.emit(StageBudget(at=self._clock(), run_id=self.run_id, stage=Stage.ENGINE.value,
                              budget_s=round(timeout, 1)))
        try:
            async with asyncio.timeout(timeout):
                await unless(self._start_node(lease), self.watch_lease())
        except TimeoutError:
            unreached = self.stage is Stage.SSH  # its sshd never let us in
            kind = "ssh_unreachable" if unreached else "not_ready"
            reason = f"the node's engine was not ready within {timeout:g} s (it got to: "
            reason += f"{self.stage.value})"
            fix = "raise [ssh] ready_timeout_secs, or read the node's channels for why"
            session = self._session
            if unreached and session is not None and session.last_outcome is _NOT_YET:
                kind = "host_key_not_pinned"  # it answered, never with the key pinned for it
                reason = (
                    f"the node never presented the host key pinned for it before create "
                    f"within {timeout:g} s: its start command did not install it before sshd "
                    "served (nothing was sent to it)"
                )
                fix = PINNED_KEY_FIX
            raise self._attempt_failed(
                AttemptFailure(self.stage, FailureScope.HOST, kind, reason, fix)
            ) from None
        except SshError as exc:
            raise self._attempt_failed(ssh_failure(exc, self.stage)) from None
        if self.watch.fatal is not None:
            raise self._attempt_failed(self._fatal_failure())
        loaded = self.watch.loaded
        assert loaded is not None
        try:
            self.local_url = await self._local_url(loaded.base_url, loaded.port)
        except SshError as exc:
            raise self._attempt_failed(ssh_failure(exc, Stage.ENGINE)) from None
        self.reach(Stage.SERVING)
        self._journal(None)
        self._keep_endpoint(serving=True)
        ready = NodeReady(
            at=self._clock(),
            run_id=self.run_id,
            model_id=loaded.model_id,
            engine=loaded.engine,
            local_url=self.local_url,
            load_ms=loaded.load_ms,
        )
        self.emit(ready)
        self.emit(self._ready_summary(ready.at))
        endpoint = self.endpoint
        if endpoint is not None:
            self.emit(
                EndpointReady(
                    at=self._clock(),
                    run_id=self.run_id,
                    base_url=endpoint.base_url,
                    model=endpoint.model,
                    auth=endpoint.auth,
                    idle_stop_mins=endpoint.idle_stop_mins,
                    port_taken=self._port_taken,
                )
            )
        return ready

    def _keep_endpoint(self, *, serving: bool) -> None:
        """The run's endpoint record: its key before the agent starts, its address once the
        node serves. A record that cannot be written is said, not fatal (prompts still work;
        only a re-attach and `mvp-tui endpoint` need it)."""
        loaded = self.watch.loaded if serving else None
        endpoint = self.endpoint or EndpointRecord(
            api_key=self.api_key, idle_stop_mins=self.watchdog.idle_stop_mins
        )  # the idle stop asked for, until the node says what it armed
        endpoint.api_key, endpoint.rpc_token = self.api_key, self.rpc_token
        if loaded is not None:
            endpoint.base_url = self.local_url or ""
            endpoint.model = loaded.model_id or "model"
            endpoint.auth = loaded.auth
            endpoint.idle_stop_mins = loaded.idle_stop_mins
        endpoint.serving = serving
        self.endpoint = endpoint
        try:
            save_endpoint(self.store, self.run_id, endpoint)
        except (OSError, ValueError) as exc:
            self._sink_line(f"the run's endpoint record could not be written: {exc}")

    async def _start_node(self, lease: LeaseRecord) -> None:
        self._keep_endpoint(serving=False)  # the key is on disk before any agent checks it
        if self.provider.info.ssh:
            await self._start_remote_agent(lease)
            self.reach(Stage.AGENT)
            await self._until_ready_or_session_ends()
        else:
            await self._until_ready_or_exit()

    async def watch_lease(self) -> None:
        """Returns only by raising `AttemptFailed` when the provider says the lease's
        instance exited, stopped or is gone (polled at the provider's poll interval); waits
        for ever on a provider that does not bill (a local child is watched as a process)."""
        lease = self.lease_record
        if lease is None or not lease.provider_id or not self.provider.info.billing:
            await asyncio.Event().wait()
            return
        walk = self.walk_settings()  # its sleep too (tests and benches time it)
        while True:
            await walk.sleep(walk.poll_interval_s)
            try:
                status = await self.provider.get(lease.provider_id)
            except ProviderError:
                continue  # transient: the next poll asks again
            if status.state in (LeaseState.DEAD, LeaseState.STOPPED, LeaseState.GONE):
                raw = one_line_ascii(status.raw_state or status.state.value, 40)
                detail = one_line_ascii(status.detail, 200, redact=self.redactor)
                raise self._attempt_failed(
                    AttemptFailure(
                        self.stage,
                        FailureScope.HOST,
                        "instance_exited",
                        f"the provider says lease {lease.provider_id} is {raw}"
                        + (f": {detail}" if detail else ""),
                        "nothing to fix here: the host failed; another offer is tried",
                    )
                )

    def _fatal_failure(self) -> AttemptFailure:
        fatal = self.watch.fatal
        assert fatal is not None
        scope = FailureScope.RUN if fatal.scope == "run" else FailureScope.HOST
        stage = AGENT_PHASE_STAGES.get(fatal.phase, self.stage)
        return AttemptFailure(stage, scope, f"node_{fatal.phase or 'failed'}", fatal.reason,
                              fatal.fix)

    def _attempt_failed(self, failure: AttemptFailure) -> AttemptFailed:
        failure = dataclasses.replace(
            failure, reason=self.redactor(failure.reason), fix=self.redactor(failure.fix)
        )
        self.emit(
            NodeFailed(at=self._clock(), run_id=self.run_id, reason=failure.reason,
                       fix=failure.fix)
        )
        return AttemptFailed(failure)

    async def _until_ready_or_exit(self) -> None:
        """A local node: its engine reports, or its agent process ends first (the seed's
        `Exited` before ready), which fails the bring-up at once instead of at the timeout."""
        ready = asyncio.ensure_future(self.watch.ready.wait())
        exited = asyncio.ensure_future(self._agent_exit())
        try:
            await asyncio.wait({ready, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (ready, exited):
                task.cancel()
            await asyncio.gather(ready, exited, return_exceptions=True)
        if not self.watch.ready.is_set() and exited.done() and not exited.cancelled():
            raise self._node_failed(
                f"the node's agent exited (code {exited.result()}) before it was ready",
                "read the node's stderr channel for why",
            )

    async def _agent_exit(self) -> int | None:
        """Returns when a local node's agent process has ended on its own, after emitting
        `AgentExited` (the seed's `Exited` observation); waits forever when the provider
        cannot tell (rented nodes: the SSH session watches their agent)."""
        lease = self.lease_record
        # A re-attached lease was not started by this process: its provider cannot watch it.
        adopted = self._resume is not None
        if self.provider.info.ssh or adopted or not lease or not lease.provider_id:
            await asyncio.Event().wait()
        assert lease is not None and lease.provider_id
        code = await self.provider.wait_exited(lease.provider_id)
        self.emit(
            AgentExited(
                at=self._clock(),
                lease_key=lease.provider_id,
                exit_code=code,
                before_ready=not self.watch.ready.is_set(),
            )
        )
        return code

    async def _until_ready_or_session_ends(self) -> None:
        """The SSH retry loop gives up (host key changed, auth, timeout) or the engine
        reports: whichever comes first."""
        session = self._session
        assert session is not None
        no_verdict = asyncio.ensure_future(self.verdict_wait.expired())
        waits: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(self.watch.ready.wait()),
            asyncio.ensure_future(session.wait()),
        ]
        if self.watchdog.required:
            waits += [asyncio.ensure_future(self._watchdog_failed.wait()), no_verdict]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in [*waits, no_verdict]:
                task.cancel()
            await asyncio.gather(*waits, no_verdict, return_exceptions=True)
        if no_verdict.done() and not no_verdict.cancelled() and self.watchdog_verdict is None:
            self.watchdog_verdict = silent(self.run_id, self._clock(), no_verdict.result())
            self.emit(self.watchdog_verdict)
        self.check_watchdog()
        if not self.watch.ready.is_set():
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
        if not self.watchdog.required:
            return
        refuse = self.config.settings.limits.unproven_node_switch == "refuse"
        verdict = self.watchdog_verdict
        refusal = switch_refusal(verdict, self.boot_guard_verdict, refuse_unproven=refuse)
        if refusal is not None:
            raise self._attempt_failed(refusal)
        if verdict is not None and verdict.status == "ready" and verdict.destroy_proven is False:
            self._sink_line(UNPROVEN_WORDS.format(provider=self.provider.info.name))

    async def keep_node_attached(self) -> None:
        """Heartbeats to the node's switch while this run is attached (at least four per
        silence window); runs until cancelled. Nothing to do without a silence limit."""
        every = self.watchdog.heartbeat_every_s
        if every is None or not self.provider.info.ssh:
            await asyncio.Event().wait()
            return
        while True:
            await asyncio.sleep(every)  # a timer, not a wait for something
            session = self._session
            if session is not None:
                await session.send_control("heartbeat")
            for worker in self._worker_sessions:  # each worker's switch hears the run too
                await worker.send_control("heartbeat")

    async def _start_remote_agent(self, lease: LeaseRecord) -> None:
        from mvp_tui.agent_bundle import agent_zip

        session = self._new_session(lease, self.watch.ready)
        self._session = session
        remote_dir = self._remote_dir(lease)
        env = {**self.node_env, **self.watchdog.node_env(lease.running_at or self._clock())}
        if self.cluster.settings.multi:  # the main node of several: --rpc over tunnels
            secrets = self.cluster.tunnel_secrets(self._pins())
            self.redactor.add(secrets.get("MVP_RPC_TUNNEL_KEY"))  # never echoed back either
            env.update(self.cluster.main_env(), **secrets)
        await session.start_agent(agent_zip(), env, remote_dir, resume=self._resume)
        command = self.settings.runtime.bootstrap_command
        if command and self._resume is None:  # once per node: not again on a re-attach
            await self._run_bootstrap_command(session, command)

    def _remote_dir(self, lease: LeaseRecord) -> str:
        """The agent's directory on the node: the run's, and for a host that replaced
        another (same node id, an earlier lease that ran) its own, so a re-attach finds it
        from the record and no old agent's logs are read as the new one's."""
        base = f"{self.settings.runtime.node_dir.rstrip('/')}/{self.run_id}"
        with contextlib.suppress(Exception):  # no record yet: the first host
            leases = self.store.load(self.run_id).leases
            index = next(i for i, x in enumerate(leases) if x.label == lease.label)
            hosts = sum(1 for x in leases[:index] if x.node_id == lease.node_id and x.running_at)
            return base if hosts == 0 else f"{base}-host{hosts + 1}"
        return base

    async def _start_worker(
        self, lease: LeaseRecord, role_env: Mapping[str, str], ready: asyncio.Event
    ) -> None:
        """A worker node of a multi-node run: its own session, agent and directory."""
        from mvp_tui.agent_bundle import agent_zip

        node = role_env.get("MVP_LOGICAL_NODE_ID", "")
        # Its own bridge: its frames carry its stream, and it writes no other node's channels.
        bridge = NodeBridge(self.hub, int(node), node_stream(run_number(self.run_id), int(node)),
                            redactor=self.redactor, own_channels_only=True)
        session = self._new_session(lease, ready, bridge)
        self._worker_sessions.append(session)
        remote_dir = f"{self.settings.runtime.node_dir.rstrip('/')}/{self.run_id}-node{node}"
        env = {**self.node_env, **role_env}
        env.update(self.watchdog.node_env(lease.running_at or self._clock()))
        await session.start_agent(agent_zip(), env, remote_dir)

    def _pins(self) -> RecordPins:
        return RecordPins(self.store, self.run_id)

    def _new_session(
        self, lease: LeaseRecord, ready: asyncio.Event, bridge: NodeBridge | None = None
    ) -> NodeSession:
        from mvp_tui.ssh.session import NodeSession

        if lease.ssh is None or lease.provider_id is None:
            raise self._node_failed("the lease has no SSH endpoint", "")
        if self._identity is None:  # prepare_ssh_identity runs before any lease is reached
            raise self._node_failed("no SSH identity was loaded for this run", "")
        self.start_ssh_debug_log()
        return NodeSession(
            lease.ssh,
            self._identity,
            self._pins(),
            lease.provider_id,
            self._ssh_settings(lease),
            self._sink,
            self._on_node_line if bridge is None else bridge.on_line,
            (bridge or self.bridge).feed_provider_line,
            ready=ready,
            redactor=self.redactor,
            # Pinned before create (Vast, RunPod): until it answers, another key is "not yet".
            awaiting_pin=lease.host_key is not None and self._resume is None,
            rotate=self._rotation_place() if self.provider.info.rotates_host_key else None,
        )

    def _rotation_place(self) -> RotationPlace:
        """Where the node keeps sshd's key and pid: the onstart's own env names and defaults
        (a test's loopback sshd is named in the engine's environment, as in the create's)."""
        from mvp_tui.ssh.host_key_rotation import RotationPlace

        env = self._environ
        return RotationPlace(
            ssh_dir=env.get(SSH_DIR_ENV, "") or SSH_DIR_DEFAULT,
            sshd_pidfile=env.get(SSHD_PIDFILE_ENV, "") or SSHD_PIDFILE_DEFAULT,
        )

    def start_ssh_debug_log(self) -> None:
        """[ssh] debug: asyncssh's debug log into the run's directory (the seed's `ssh -v`),
        from the first SSH session on (the run's record, and so its directory, exist then)."""
        if not self.config.settings.ssh.debug or self._ssh_debug_stop is not None:
            return
        from mvp_tui.ssh.debug_log import DEBUG_LOG_FILE, start_debug_log

        run_dir = self.store.run_dir(self.run_id)
        try:
            self._ssh_debug_stop = start_debug_log(run_dir, self.redactor)
        except OSError as exc:  # a diagnostic: the run goes on without it
            self._sink_line(f"[ssh] debug: the SSH debug log could not be opened: {exc}")
            return
        where = run_dir / DEBUG_LOG_FILE
        self._sink_line(f"[ssh] debug: the SSH client's debug log goes to {where}")

    def _ssh_settings(self, lease: LeaseRecord) -> SshSettings:
        """[ssh] for this lease: the wait for a first answer from its sshd is budgeted by the
        image's size and the offer's download bandwidth ([ssh] ready_timeout_secs caps it)."""
        ssh = self.settings.ssh
        offer = self._offers.get(lease.offer_id or "")
        budget = boot_budget_s(
            ssh.ready_timeout,
            self.config.settings.image.size_gb,
            offer.down_mbps if offer is not None else 0.0,
        )
        self.emit(
            StageBudget(at=self._clock(), run_id=self.run_id, stage=Stage.SSH.value,
                        budget_s=round(budget, 1))
        )
        return dataclasses.replace(ssh, reach_timeout=budget)

    async def _run_bootstrap_command(self, session: NodeSession, command: str) -> None:
        """`[vastai] bootstrap_command`, after the agent is set up and started (the Vast seed ran
        it as the node's bootstrap; here the agent is that, and the command is the user's
        extra step). A failure fails the bring-up, which tears the lease down."""
        self._sink_line("running [vastai] bootstrap_command on the node")
        code = await session.run_in_run_dir(command, self.settings.ssh.ready_timeout)
        if code != 0:
            raise self._attempt_failed(
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
        self._sink_line("[vastai] bootstrap_command finished (status 0)")

    async def _local_url(self, node_base_url: str, port: int) -> str:
        if not self.provider.info.ssh:
            if self._local_port_asked and port != self._local_port_asked:
                self._port_taken = self._local_port_asked  # taken after the check: said
            return node_base_url
        assert self._session is not None
        # 0: any free port; a replaced node takes the port its predecessor had, so clients
        # pointed at it keep working.
        # A re-attach keeps the earlier run's address.
        earlier = self.endpoint.port if self.endpoint is not None else None
        wanted = self._openai_port or earlier or self.settings.prompt.openai_port
        if wanted and self._openai_port is None and not local_port_free(wanted):
            self._port_taken = wanted  # said with the endpoint; another port serves
            wanted = 0
        local_port = await self._session.forward(port, wanted)
        self._openai_port = local_port
        return f"http://127.0.0.1:{local_port}"

    def _node_failed(self, reason: str, fix: str) -> RunFailed:
        reason, fix = self.redactor(reason), self.redactor(fix)
        self.emit(NodeFailed(at=self._clock(), run_id=self.run_id, reason=reason, fix=fix))
        return RunFailed(reason, fix)

    def _journal(self, failure: AttemptFailure | None) -> None:
        """The attempt's outcome into the host journal (host memory for later runs)."""
        lease = self.lease_record
        offer = self._offers.get(lease.offer_id) if lease is not None else None
        if lease is None or offer is None:
            return
        now = self._clock()
        outcome = HostOutcome(
            at=now,
            run_id=self.run_id,
            provider=offer.provider,
            host=host_key(offer),
            offer_id=offer.offer_id,
            gpu_name=offer.gpu_name,
            stage=failure.stage.value if failure is not None else Stage.SERVING.value,
            ok=failure is None,
            reason=failure.reason if failure is not None else "",
            stage_secs=self.stage_secs(now),
            cost_usd=round(self._lease_spend(lease, now), 6),
            blames_host=failure is None or failure.scope is FailureScope.HOST,
            image=self.config.node_image()[0],  # the board's ~ready: this host has it cached
            model=config_model_key(self.config),  # learned ~ready is per model served
        )
        try:
            HostJournal(self.config.state_dir, redact=self.redactor).append(outcome)
        except OSError as exc:  # host memory helps later runs; this one goes on
            self._sink_line(f"the host journal could not be written: {exc}")

    def _lease_spend(self, lease: LeaseRecord, now: float) -> float:
        """One lease's spend so far, as the ledger (and so the user) sees it."""
        row = self.ledger.row(lease.provider_id, now) if lease.provider_id else None
        return row.spend_usd if row is not None else 0.0

    def _ready_summary(self, now: float) -> ReadySummary:
        """Stage times of the attempt that served; the money of every host tried so far."""
        secs = self.stage_secs(now)
        leases = [*self.past_leases, *([self.lease_record] if self.lease_record else [])]
        spent = self.ledger.spent(now, self.run_id)
        began = min((at for at in self.stage_started.values()), default=now)
        first = min((x.created_at for x in leases if x.created_at is not None), default=began)
        parts = stage_parts(secs)
        total = max(0.0, now - min(first, began))
        # The start command fetched the model during the boot and the SSH wait.
        fetched_at_boot = self.provider.info.ssh and wants_prefetch(self.node_env)
        overlapped = frozenset({"model"}) if fetched_at_boot else frozenset()
        return ReadySummary(at=now, run_id=self.run_id, seconds=round(total, 3), stages=parts,
                            spent_usd=round(spent, 6),
                            text=summary_text(total, parts, spent, overlapped))

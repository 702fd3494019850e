"""The teardown steps of a run, each on its own (the run controller runs them in turn): the
RPC server, the prompt queue, the SSH sessions (the agent stopped, or left detached with
its log position marked for a re-attach), and this run's leases destroyed, confirmed.
"""

from __future__ import annotations

import asyncio
import contextlib

from mvp_tui.engine.run_serve import ServePhase
from mvp_tui.lease.restart import DownReport, LeaseRef, down
from mvp_tui.node_protocol import WEIGHTS_CHANNEL
from mvp_tui.ssh.logtail import LogPositions


class TeardownPhase(ServePhase):
    """Teardown: the closing steps."""

    async def close_rpc(self) -> None:
        rpc, self._rpc = self._rpc, None
        if rpc is not None:
            await rpc.aclose()

    async def close_prompts(self) -> None:
        prompts, self.prompts = self.prompts, None
        if prompts is not None:
            await prompts.aclose()

    async def close_session(self, shutdown_agent: bool = True) -> None:
        """End the SSH session; with `shutdown_agent` the agent and engine are stopped too
        (bounded: the lease is destroyed next, which ends them anyway)."""
        if self.endpoint is not None and self.endpoint.serving:
            self._keep_endpoint(serving=False)  # the forward ends with the session
        workers, self._worker_sessions = self._worker_sessions, []
        for worker in workers:  # a rented multi-node run's workers: stopped with the run
            if not shutdown_agent:  # kept: its silence switch stands down, as the main's
                await worker.send_control("detach")
            limit = worker.settings.connect_timeout + 2 * worker.settings.shutdown_grace + 5
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(worker.close(shutdown_agent=shutdown_agent), limit)
        session, self._session = self._session, None
        if session is None:
            return
        if not shutdown_agent:
            # Left running on purpose: the node's silence switch stands down (its deadline
            # stays), or it would destroy the lease the user chose to keep.
            if not await session.send_control("detach"):
                self._sink_line(f"could not tell lease {session.lease_key}'s node to detach")
            await session.close(shutdown_agent=False)
            self._mark_agent_log(session.positions)
            return
        limit = session.settings.connect_timeout + 2 * session.settings.shutdown_grace + 5
        try:
            await asyncio.wait_for(session.close(shutdown_agent=True), limit)
        except TimeoutError:
            self._sink_line(f"ssh close to lease {session.lease_key} gave up after {limit:g} s")

    def _mark_agent_log(self, positions: LogPositions) -> None:
        """Record where this run stopped reading the agent left running (with the engine
        verdict it saw), for a later re-attach to resume there."""
        lease = self.lease_record
        if lease is None or lease.provider_id is None:
            return
        # The main node's verdict, not a worker's (every node writes this channel).
        frames = self.hub.tail(WEIGHTS_CHANNEL).frames
        verdict = [f for f in frames if f.stream == self.bridge.stream]
        ready = verdict[-1].payload.decode("utf-8", "replace") if verdict else None
        self.store.mark_agent_log(
            self.run_id, lease.provider_id, (positions.stdout, positions.stderr), ready
        )
        lease.log_positions, lease.ready_record = (positions.stdout, positions.stderr), ready

    async def destroy_leases(self) -> DownReport:
        """Destroy, confirmed, every lease this run's record holds open (including creates
        a cancelled walk left unclear: the provider is listed by the run's labels)."""
        if not self.store.record_path(self.run_id).exists():
            self.lease_record = None  # nothing was ever about to be created
            return DownReport((), (), (), ())
        report = await down(
            self.provider, self.store, self.run_id, self._sink, self.walk_settings(), self._clock
        )
        if report.ok:
            self.lease_record = None
        return report

    def open_leases(self) -> list[LeaseRef]:
        """This run's leases that may still bill, from its record."""
        if not self.store.record_path(self.run_id).exists():
            return []
        record = self.store.load(self.run_id)
        return [LeaseRef(self.run_id, x.provider_id, x.label) for x in record.open_leases()]

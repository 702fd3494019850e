"""Serving (`Serving`): the prompt queue and RPC server (opened and closed here), the watch
on a serving node (fatal verdicts, exits, stalls, the idle stop) and the spend and hours
limits.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mvp_tui.engine.cluster import Cluster
from mvp_tui.engine.context import RunContext, RunLeases
from mvp_tui.engine.events import LimitReached
from mvp_tui.engine.failures import (
    AttemptFailed,
    AttemptFailure,
    FailureScope,
    NodeStoppedItself,
    RunFailed,
    Stage,
)
from mvp_tui.engine.limits import watch_limits
from mvp_tui.engine.model_fit import ENGINE_DEFAULT_CONTEXT
from mvp_tui.engine.run_bringup import NodeLink
from mvp_tui.engine.run_core import NodeVerdicts, unless
from mvp_tui.engine.speed_log import ServedOn, SpeedLog
from mvp_tui.engine.stall import StallDetected
from mvp_tui.lease.host_journal import HostJournal, config_model_key
from mvp_tui.prompt.conversation import Conversation
from mvp_tui.prompt.queue import PromptQueue, Sampling
from mvp_tui.prompt.rpc import PromptRpcServer, parse_rpc_addr

if TYPE_CHECKING:
    from mvp_tui.prompt.client import NodeClients  # httpx: loaded when first prompted


@dataclass(eq=False)
class Serving:
    """Serving: the prompt queue and RPC server (owned here, closed at teardown), the watch
    on the serving node and the limit steps."""

    ctx: RunContext
    leases: RunLeases
    link: NodeLink
    verdicts: NodeVerdicts
    cluster: Cluster
    prompts: PromptQueue | None = field(default=None, init=False)
    _rpc: PromptRpcServer | None = field(default=None, init=False)
    _clients: NodeClients | None = field(default=None, init=False)

    async def start_prompts(self, *, rpc: bool = True) -> PromptQueue:
        """The prompt queue (and RPC server) on the serving node; a replaced node takes over
        the same queue and RPC address, its waiting prompts resumed."""
        if self.link.local_url is None or self.verdicts.watch.loaded is None:
            raise RunFailed("the node is not ready: bring it up before prompting")
        lease = self.leases.lease_record
        price = lease.price_per_hour if lease is not None and lease.price_per_hour else None
        if self.prompts is not None:
            self.prompts.price_per_hour = price
            self.prompts.resume()
            return self.prompts
        redactor = self.ctx.redactor
        from mvp_tui.prompt.client import NodeClients, PromptClient  # httpx loads when prompted

        clients = self._clients = NodeClients(api_key=self.ctx.api_key or None, redactor=redactor)

        def client() -> PromptClient:  # the node of the moment: a replacement moves it
            loaded = self.verdicts.watch.loaded
            model = (loaded.model_id if loaded else "") or "model"
            return clients(self.link.local_url or "", model)

        speeds = SpeedLog(HostJournal(self.ctx.config.state_dir, redact=redactor), self._serving,
                          self.ctx.clock, self.ctx.log)
        tap = speeds.tap(self.verdicts.stall.tap(self.ctx.sink))
        prompt = self.ctx.settings.prompt
        context = self.ctx.settings.model.max_context or ENGINE_DEFAULT_CONTEXT
        self.prompts = PromptQueue(
            client, tap, price,
            conversation=Conversation(context, system=prompt.system),
            sampling=Sampling(prompt.temperature, prompt.top_p, prompt.seed),
        )
        if rpc:
            addr = parse_rpc_addr(
                self.ctx.settings.prompt.rpc_addr,
                allow_remote=self.ctx.settings.prompt.rpc_allow_remote,
            )
            self._rpc = PromptRpcServer(
                self.prompts,
                addr,
                token=self.ctx.rpc_token,
                default_max_tokens=self.ctx.settings.prompt.max_tokens,
                sink=self.ctx.sink,
            )
            bound = await self._rpc.start()
            if self.link.endpoint is not None:  # `mvp-tui endpoint` tells a tool where, and how
                self.link.endpoint.rpc_addr = str(bound)
                self.link.keep_endpoint(serving=True)
        return self.prompts

    def _serving(self) -> ServedOn | None:
        """The offer the node of the moment runs on (a replacement moves it), for the
        journal's speed samples."""
        lease = self.leases.lease_record
        offer = self.leases.offers.get(lease.offer_id or "") if lease is not None else None
        if offer is None:
            return None
        return ServedOn(self.ctx.run_id, offer, config_model_key(self.ctx.config),
                       self.ctx.settings.model.max_context or 0)

    def pause_prompts(self) -> None:
        """The node is gone: prompts wait (the one streaming ends with its fault)."""
        if self.prompts is not None:
            self.prompts.pause()

    async def guard_limits(self) -> None:
        """Returns only by raising `RunFailed` when `[limits] max_spend_usd` or `max_hours`
        is reached (the caller tears down); waits forever when neither is set."""
        limits = self.ctx.settings.limits
        if not limits.any:
            await asyncio.Event().wait()
        # The ledger holds every lease of the run: a multi-node run's workers bill too, and
        # so did every earlier attempt's host.
        lease, (limit, value, reached) = await watch_limits(
            limits, self.ctx.ledger, self.ctx.run_id, lambda: self.leases.lease_record,
            self.ctx.clock,
        )
        self.ctx.emit(
            LimitReached(
                at=self.ctx.clock(),
                run_id=self.ctx.run_id,
                provider_id=lease.provider_id or "",
                limit=limit,
                value=value,
                reached=round(reached, 6),
            )
        )
        unit = "USD" if limit == "max_spend_usd" else "hours"
        raise RunFailed(
            f"[limits] {limit} = {value:g} reached ({reached:.4g} {unit}): tearing down; "
            f"raise [limits] {limit} to run longer"
        )

    def limit_reached(self) -> tuple[str, str] | None:
        """(reason, fix) when a spend or hours limit is reached by the leases so far."""
        if not self.ctx.ledger.rows(self.ctx.clock(), self.ctx.run_id):
            return None
        breach = self.ctx.settings.limits.breach(self.ctx.ledger, self.ctx.clock(), self.ctx.run_id)
        if breach is None:
            return None
        limit, value, reached = breach
        return (
            f"[limits] {limit} = {value:g} reached ({reached:.4g}) by the hosts tried so far",
            f"raise [limits] {limit} to try more hosts",
        )

    async def watch_node(self) -> None:
        """Returns only by raising `AttemptFailed` (stage serving) when the node fails after
        it was ready: its engine reports a fatal error, its agent exits, the SSH session gives
        up, or the provider says the instance exited or is gone."""
        try:
            await unless(self._watch_serving_node(), self.link.watch_lease())
        except NodeStoppedItself:
            raise
        except AttemptFailed:
            if self.verdicts.idle_stopped.is_set():  # its instance went as the node said it would
                raise self._stopped_itself() from None
            raise
        except RunFailed as failed:  # already announced (NodeFailed)
            if self.verdicts.idle_stopped.is_set():
                raise self._stopped_itself() from None
            fatal = self.verdicts.watch.fatal
            scope = FailureScope.RUN if fatal is not None and fatal.scope == "run" else None
            raise AttemptFailed(
                AttemptFailure(Stage.SERVING, scope or FailureScope.HOST, "node_lost",
                               failed.message, failed.fix)
            ) from None

    async def _watch_serving_node(self) -> None:
        session = self.link.session
        failed = self.verdicts.watch.failed
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(failed.wait())]
        if session is not None:
            waits.append(asyncio.ensure_future(session.wait()))
        exited = asyncio.ensure_future(self.link.agent_exit())
        waits.append(exited)
        waits += [asyncio.ensure_future(w.wait()) for w in self.link.worker_sessions]
        stall: asyncio.Future[object] = asyncio.ensure_future(self._stall_watch())
        waits.append(stall)
        waits.append(asyncio.ensure_future(self.verdicts.idle_stopped.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        if self.verdicts.idle_stopped.is_set():
            raise self._stopped_itself()
        stalled = stall.exception() if stall.done() and not stall.cancelled() else None
        if isinstance(stalled, StallDetected) and not self.verdicts.watch.failed.is_set():
            raise self.link.node_failed(
                self.cluster.describe_stall(str(stalled)),
                "read the nodes' channels; raise [prompt] stall_secs for a slow model",
            )
        fatal = self.verdicts.watch.fatal
        if fatal is None and exited.done() and not exited.cancelled():
            raise self.link.node_failed(
                f"the node's agent exited on its own (code {exited.result()})",
                "read the node's stderr channel for why",
            )
        lost = next((w for w in self.link.worker_sessions if w.stop_reason is not None), None)
        if fatal is None and lost is not None:
            why = lost.failure.message if lost.failure is not None else str(lost.stop_reason)
            raise self.link.node_failed(
                f"the SSH session to worker lease {lost.lease_key} ended: {why}",
                "read the worker's channels for why",
            )
        if fatal is None and session is not None and session.failure is not None:
            failure = session.failure
            raise self.link.node_failed(failure.message, failure.fix)
        if fatal is None and session is not None:
            raise self.link.node_failed(
                f"the SSH session to lease {session.lease_key} ended ({session.stop_reason})",
                "read the node's channels for why",
            )
        raise self.link.node_failed(
            fatal.reason if fatal else "the node failed", fatal.fix if fatal else ""
        )

    def _stopped_itself(self) -> NodeStoppedItself:
        mins = self.link.endpoint.idle_stop_mins if self.link.endpoint is not None else None
        window = f"{mins:g} min" if mins else "its window"
        message = (
            f"the node's idle stop: no request reached its model for {window}, so it "
            "destroys its own lease"
        )
        self.ctx.log(message)
        return NodeStoppedItself(message, "raise [limits] idle_stop_mins, or 0 turns it off")

    async def after_prompts(self, grace_s: float = 15.0) -> None:
        """Raises `RunFailed` when a prompt's stream broke because the engine went away (a
        node died mid-answer): with the node's own verdict when it comes within `grace_s`."""
        lost = self.verdicts.stall.engine_lost
        if lost is None:
            return
        try:
            async with asyncio.timeout(grace_s):
                await self.verdicts.watch.failed.wait()
        except TimeoutError:
            raise self.link.node_failed(
                f"prompt {lost.prompt_id} was cut off ({lost.error}) and the node said nothing",
                "read the node's channels for why",
            ) from None
        fatal = self.verdicts.watch.fatal
        assert fatal is not None
        raise self.link.node_failed(fatal.reason, fatal.fix)

    async def _stall_watch(self) -> object:
        await self.verdicts.stall.watch()
        return None

    async def postpone_idle_stop(self) -> bool:
        """A key in the dashboard: the node's idle stop counts it as use (rented nodes; a
        local one does not bill). True once the node was told."""
        session = self.link.session
        return session is not None and await session.send_control("use")

    async def close_rpc(self) -> None:
        rpc, self._rpc = self._rpc, None
        if rpc is not None:
            await rpc.aclose()

    async def close_prompts(self) -> None:
        prompts, self.prompts = self.prompts, None
        if prompts is not None:
            await prompts.aclose()
        clients, self._clients = self._clients, None
        if clients is not None:
            await clients.aclose()

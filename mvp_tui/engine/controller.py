"""The one owner of a run's lifecycle: lease → bring up → serve → watch → stop.

The dashboard and headless mode are thin drivers of a `RunController`: they differ only in
how they ask the user. Every way out of either ends in `stop()`, which is idempotent, safe to
call from any number of callers at once, cancels everything the run started, and always
reaches the provider's destroy: each step before it is isolated, so a failure to close the
prompts, the RPC server or the SSH session is logged and never skips the teardown. An
exception in the teardown itself becomes an unconfirmed lease (exit 3, named), never a
traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mvp_tui.engine.attempt_walk import AttemptWalk
from mvp_tui.engine.events import BUSY_STATES, NodeReplacing, RunState, RunStateChanged
from mvp_tui.engine.failures import AttemptFailed, FailureScope, NodeStoppedItself, Stage
from mvp_tui.engine.run import RunEngine, RunFailed
from mvp_tui.errors import UserError
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.account_check import AccountCheck
from mvp_tui.lease.restart import DownReport, LeaseRef, OpenLease
from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import one_line_ascii


class PlanEnd(enum.Enum):
    """How `lease_and_serve` came back (failures raise `RunFailed` instead)."""

    LEASED = "leased"  # --until leased: the lease runs, deliberately kept
    READY = "ready"  # --until ready: the node serves, deliberately kept
    DONE = "done"  # the plan ran to its end (prompts answered): tear down next
    STOPPED = "stopped"  # `stop()` ended the run (a quit, a signal, a teardown key)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run should do once it holds a lease.

    `until` ends the lifecycle early with the lease kept (rented nodes only; a local node is
    a child process and never outlives the command). `prompts` are sent once the node is
    ready and the lifecycle ends when they have; with neither, the run serves until stopped.
    """

    until: str | None = None  # "leased" | "ready"
    prompts: tuple[str, ...] = ()
    max_tokens: int = 64
    rpc: bool = True  # serve the prompt RPC while serving
    serve: bool = True  # with no prompts and no `until`: serve until stopped
    keep: bool = True  # at `until`, leave a rented lease running (False: tear it down)


@dataclass(frozen=True, slots=True)
class StopResult:
    """The end of a run: what was confirmed gone and what may still bill."""

    destroyed: tuple[LeaseRef, ...] = ()
    left: tuple[LeaseRef, ...] = ()  # may still bill: kept on purpose or not confirmed
    kept: bool = False  # the user chose to leave the leases running
    errors: tuple[str, ...] = ()
    # The provider's account listed under our prefix after the teardown (None: not checked,
    # the leases kept or a provider that never bills). A listing that failed is a warning;
    # ours found there and not destroyed may bill.
    account: AccountCheck | None = None

    @classmethod
    def from_down(cls, report: DownReport) -> StopResult:
        """A teardown's end as `down` reported it (its first account check with it)."""
        return cls(
            destroyed=report.confirmed,
            left=report.unconfirmed,
            errors=report.errors,
            account=report.accounts[0] if report.accounts else None,
        )

    @property
    def nothing_bills(self) -> bool:
        return (
            not self.left
            and not self.errors
            and not (self.account is not None and self.account.may_bill)
        )

    @property
    def exit_code(self) -> int:
        return int(ExitCode.OK if self.nothing_bills else ExitCode.MAY_BILL)

    def left_lines(self) -> list[str]:
        """One line per lease that may bill, naming it and the command that ends it; then
        the account check's words (what it destroyed, what may bill, kept volumes)."""
        why = "kept running" if self.kept else "teardown NOT confirmed"
        lines = [
            f"lease {ref.provider_id or ref.label} of run {ref.run_id} may still bill ({why}"
            + (f": {ref.reason}" if ref.reason and not self.kept else "")
            + f"); end it with `mvp-tui down {ref.run_id}`"
            for ref in self.left
        ]
        lines += [f"error: {error}" for error in self.errors]
        # Its unconfirmed instances are in `left` already (named above).
        return lines + (self.account.lines(unconfirmed=False) if self.account else [])


class RunAborted(RunFailed):
    """The run failed and was stopped; `result` says whether anything may still bill."""

    def __init__(self, reason: str, result: StopResult) -> None:
        super().__init__(reason)
        self.reason = reason
        self.result = result



class RunController:
    """Owns one run's lifecycle on top of a `RunEngine` (which owns its resources)."""

    def __init__(self, engine: RunEngine) -> None:
        self.engine = engine
        self.state = RunState.IDLE
        self._lifecycle: asyncio.Task[PlanEnd] | None = None
        self._side: set[asyncio.Task[Any]] = set()  # limit guard, node watch: end with the run
        self._stopping: asyncio.Task[StopResult] | None = None
        self._closed = False
        self.result: StopResult | None = None  # the last stop's result
        self.served = False  # the node was ready and serving at some point
        self._guards: list[asyncio.Future[None]] = []  # limits and heartbeats: once per run
        self._prompts_sent = False  # a plan's prompts go into the queue once, whatever node
        self.replacements = 0  # serving nodes lost and replaced

    # -- what drivers read ----------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A lease is being made, brought up or torn down."""
        return self.state in BUSY_STATES

    @property
    def holds_lease(self) -> bool:
        """Something of this run may bill now (a live lease, or one in the making)."""
        return self.engine.leases.lease_record is not None or self.busy

    @property
    def closed(self) -> bool:
        return self._closed

    def _set_state(self, state: RunState) -> None:
        if state is self.state:
            return
        self.state = state
        self.served = self.served or state is RunState.SERVING
        ctx = self.engine.ctx
        with contextlib.suppress(Exception):  # a sink that fails must not stop the run
            ctx.emit(RunStateChanged(at=ctx.clock(), run_id=ctx.run_id, state=state.value))

    # -- the lifecycle ----------------------------------------------------------------------------

    async def lease_and_serve(self, offers: Sequence[Offer], plan: Plan) -> PlanEnd:
        """Lease the first offer that works, bring the node up, serve as the plan says.
        A failure tears down what was leased (confirmed) and raises `RunAborted` (its
        `result` says whether anything may still bill)."""
        return await self._own(self._lease_then_serve(list(offers), plan))

    async def reattach(self, earlier: OpenLease, plan: Plan) -> PlanEnd:
        """Continue an earlier run's running lease: re-attach to its agent and serve."""
        self.engine.leasing.adopt(earlier)
        return await self._own(self._attach_then_serve(plan))

    async def _own(self, work: Awaitable[PlanEnd]) -> PlanEnd:
        if self._closed:
            raise RunFailed("this run is ending: no new lease")
        if self._lifecycle is not None and not self._lifecycle.done():
            raise RunFailed("a lease is already being made or served: stop it first")
        if self._stopping is not None and not self._stopping.done():
            await asyncio.shield(self._stopping)
        self._stopping = None
        self.result = None  # a new lease: an earlier stop's result no longer says it all
        task = asyncio.ensure_future(work)
        self._lifecycle = task
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            # The driver itself is cancelled: the run must not be left half-made.
            await self.stop(reason="cancelled")
            raise
        if task.cancelled():
            return PlanEnd.STOPPED
        error = task.exception()
        if error is None:
            return task.result()
        reason = self._describe(error)
        raise RunAborted(reason, await self.stop(reason=reason)) from error

    def _describe(self, error: BaseException) -> str:
        if isinstance(error, UserError):
            text = str(error)
        elif isinstance(error, OSError) and self._in_state_dir(error.filename):
            text = (
                f"the run record {error.filename} could not be written ({error.strerror}): "
                f"[state] dir = {str(self.engine.config.state_dir)!r} must take the records "
                "written before every create; free space or fix it, then `mvp-tui ls`"
            )
        elif isinstance(error, OSError):  # worded by the OS: the path and what went wrong
            text = str(error)
        else:
            text = f"unexpected {type(error).__name__}: {error}"
        return self.engine.redactor(text)

    def _in_state_dir(self, filename: object) -> bool:
        if not isinstance(filename, str):
            return False
        state = str(self.engine.config.state_dir.resolve())
        return str(Path(filename).resolve()).startswith(state)

    async def _lease_then_serve(self, offers: list[Offer], plan: Plan) -> PlanEnd:
        """The walk to a serving node: each attempt runs from create to a healthy engine; a
        host that fails on the way (or is lost while serving) is destroyed, confirmed, and
        the next offer tried. A run-wide failure, the same failure on several hosts in a
        row, `[lease] max_attempts` or a limit stop the run."""
        engine = self.engine
        self._set_state(RunState.LEASING)
        engine.check_state_dir()
        await engine.leasing.prepare_ssh_identity()
        walk = AttemptWalk(offers, engine.ctx.settings.attempts)
        engine.attempts.announce_order(walk.remaining, "as picked")
        while True:
            engine.attempts.begin_attempt()
            self._set_state(RunState.LEASING)
            result = await engine.leasing.lease(walk.remaining)
            if not result.ok:
                raise RunFailed(engine.redactor(walk.exhausted(result.reason)))
            walk.leased(result.attempts)
            try:
                return await self._serve(plan)
            except AttemptFailed as failed:
                await self._after_failed_attempt(failed, walk)

    async def _after_failed_attempt(self, failed: AttemptFailed, walk: AttemptWalk) -> None:
        """Destroy the failed host (confirmed) and decide: walk on, or stop with the fix."""
        engine, failure = self.engine, failed.failure
        lost = failure.stage is Stage.SERVING
        replace = engine.ctx.settings.attempts.replace_lost
        if engine.cluster.settings.multi or (lost and not replace):
            raise failed  # several nodes: no replacement (yet); "stop": today's behaviour
        if lost:
            lease = engine.leases.lease_record
            self.replacements += 1
            engine.ctx.emit(
                NodeReplacing(
                    at=engine.ctx.clock(),
                    run_id=engine.ctx.run_id,
                    provider_id=(lease.provider_id or "") if lease else "",
                    reason=failure.reason,
                    replacement=self.replacements,
                )
            )
            engine.serving.pause_prompts()  # queued prompts wait for the next node
        self._set_state(RunState.BRINGING_UP)
        if not await engine.attempts.discard_attempt(failure):
            # A run-wide cause has its own fix (the provider's API down: its status page).
            then = f"; then {failure.fix}" if failure.scope is FailureScope.RUN else ""
            raise RunFailed(
                f"the failed host's lease could not be confirmed deleted and may still bill; "
                f"no other lease is made ({failure.reason})",
                f"retry with `mvp-tui down {engine.ctx.run_id}` or check the provider's console"
                + then,
            )
        if failure.scope is FailureScope.RUN:
            raise RunFailed(failure.reason, failure.fix)
        stop = walk.failed(failure) or engine.serving.limit_reached()
        if stop is not None:
            raise RunFailed(*stop)
        engine.attempts.announce_order(walk.remaining, f"after {failure.kind}")

    async def _attach_then_serve(self, plan: Plan) -> PlanEnd:
        self._set_state(RunState.BRINGING_UP)
        await self.engine.leasing.prepare_ssh_identity()
        return await self._serve(plan)

    async def _serve(self, plan: Plan) -> PlanEnd:
        engine = self.engine
        # A local node is a child process: it never outlives us.
        can_keep = engine.provider.info.ssh and plan.keep
        if plan.until == "leased":
            return PlanEnd.LEASED if can_keep else PlanEnd.DONE
        if not self._guards:  # once per run: they outlive a replaced node
            self._guards = [
                self._spawn(engine.serving.guard_limits()),
                self._spawn(engine.link.keep_node_attached()),  # heartbeats: the switch stays quiet
            ]
        limits = self._guards[0]
        self._set_state(RunState.BRINGING_UP)
        await _first_of(engine.link.bring_up(), limits)
        if plan.until == "ready" and not plan.prompts:
            return PlanEnd.READY if can_keep else PlanEnd.DONE
        self._set_state(RunState.SERVING)
        watch = self._spawn(engine.serving.watch_node())
        try:
            return await self._serving(plan, watch, limits)
        except NodeStoppedItself:
            return PlanEnd.DONE  # nobody used it: the node ended its own lease

    async def _serving(
        self, plan: Plan, watch: asyncio.Future[None], limits: asyncio.Future[None]
    ) -> PlanEnd:
        engine = self.engine
        if plan.prompts:
            queue = await engine.serving.start_prompts(rpc=False)
            if not self._prompts_sent:
                self._prompts_sent = True
                for text in plan.prompts:
                    queue.submit(text, plan.max_tokens)
            await _first_of(queue.drained(), watch, limits)
            await engine.serving.after_prompts()  # an answer cut off by a dying node fails the run
            return PlanEnd.DONE
        if plan.until is not None or not plan.serve:
            return PlanEnd.DONE
        await engine.serving.start_prompts(rpc=plan.rpc)
        await _first_of(watch, limits)  # ends only by raising: the node failed, a limit hit
        raise RunFailed("the node stopped serving")

    def _spawn(self, work: Awaitable[None]) -> asyncio.Future[None]:
        task = asyncio.ensure_future(work)
        self._side.add(task)
        task.add_done_callback(self._side.discard)
        return task

    # -- the one way out ------------------------------------------------------------------------

    async def stop(
        self, *, destroy: bool = True, final: bool = False, reason: str = ""
    ) -> StopResult:
        """End the run: cancel what it started, close its parts, destroy its leases
        (confirmed) unless `destroy` is False (rented leases are then left running, recorded).
        Idempotent and safe to call concurrently: every caller gets the same result. `final`
        forbids any new lease afterwards (quitting)."""
        self._closed = self._closed or final
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop(destroy, reason))
        # Shielded: a caller cancelled meanwhile (a second Ctrl-C) never stops the teardown.
        return await asyncio.shield(self._stopping)

    async def _stop(self, destroy: bool, reason: str) -> StopResult:
        engine = self.engine
        self._set_state(RunState.TEARING_DOWN)
        if reason:
            engine.ctx.log(f"stopping the run: {reason}")
        await self._cancel_all()
        keep = not destroy and engine.provider.info.ssh  # a local node never outlives us
        await self._isolated("closing the prompt RPC", engine.serving.close_rpc())
        await self._isolated("closing the prompts", engine.serving.close_prompts())
        await self._isolated("closing the SSH session", engine.link.close_session(not keep))
        if keep:
            result = self._kept()
        else:
            result = await self._destroy()
        self.result = result
        self._set_state(RunState.ENDED)
        return result

    async def _cancel_all(self) -> None:
        tasks = [t for t in (self._lifecycle, *self._side) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        # A cancelled walk destroys what it created before it ends: wait for it.
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _isolated(self, what: str, step: Awaitable[object]) -> None:
        try:
            await step
        except Exception as exc:
            self.engine.ctx.log(
                f"{what} failed ({type(exc).__name__}: {one_line_ascii(str(exc))}); "
                "tearing down anyway"
            )

    def _kept(self) -> StopResult:
        try:
            open_leases = self.engine.teardown.open_leases()
        except Exception as exc:
            return StopResult(kept=True, errors=(self._describe(exc),))
        return StopResult(left=tuple(open_leases), kept=True)

    async def _destroy(self) -> StopResult:
        try:
            report: DownReport = await self.engine.teardown.destroy_leases()
        except Exception as exc:
            left: tuple[LeaseRef, ...] = ()
            with contextlib.suppress(Exception):
                left = tuple(self.engine.teardown.open_leases())
            reason = self._describe(exc)
            return StopResult(
                left=tuple(LeaseRef(r.run_id, r.provider_id, r.label, reason) for r in left),
                errors=() if left else (f"teardown failed: {reason}",),
            )
        return StopResult.from_down(report)


async def _first_of(*waits: Awaitable[Any]) -> None:
    """Run the waits together; the first to end (or raise) ends the others. Futures passed
    in (the limit guard, the node watch) are shared: waited on, never cancelled here."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    mine = [t for t, w in zip(tasks, waits, strict=True) if t is not w]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in mine:
            task.cancel()
        await asyncio.gather(*mine, return_exceptions=True)


def describe_exit(result: StopResult, emit: Callable[[str], None]) -> None:
    """Say what may still bill, one line per lease."""
    for line in result.left_lines():
        emit(line)

"""The teardown of a run's leases (`Teardown`): this run's leases destroyed, confirmed, and
those that may still bill, from its record. The other closing steps belong to their owners
(the run controller runs them in turn): the RPC server and prompt queue (`Serving`), the
SSH sessions (`NodeLink`).
"""

from __future__ import annotations

from mvp_tui.engine.context import RunContext, RunLeases
from mvp_tui.lease.restart import DownReport, LeaseRef, down


class Teardown:
    """Teardown: the run's leases, destroyed and confirmed."""

    def __init__(self, ctx: RunContext, leases: RunLeases) -> None:
        self.ctx = ctx
        self.leases = leases

    async def destroy_leases(self) -> DownReport:
        """Destroy, confirmed, every lease this run's record holds open (including creates
        a cancelled walk left unclear: the provider is listed by the run's labels)."""
        ctx = self.ctx
        if not ctx.store.record_path(ctx.run_id).exists():
            self.leases.hold(None)  # nothing was ever about to be created
            return DownReport((), (), (), ())
        report = await down(
            ctx.provider, ctx.store, ctx.run_id, ctx.sink, ctx.walk_settings(), ctx.clock
        )
        if report.ok:
            self.leases.hold(None)
        return report

    def open_leases(self) -> list[LeaseRef]:
        """This run's leases that may still bill, from its record."""
        ctx = self.ctx
        if not ctx.store.record_path(ctx.run_id).exists():
            return []
        record = ctx.store.load(ctx.run_id)
        return [LeaseRef(ctx.run_id, x.provider_id, x.label) for x in record.open_leases()]

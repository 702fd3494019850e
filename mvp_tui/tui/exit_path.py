"""Every way out of the dashboard: our `q`, Textual's ctrl+q and palette Quit, `App.exit`
from anywhere, a closed terminal (SIGHUP) or a kill (SIGTERM). While something may bill,
each asks first (or, with nobody to ask, destroys confirmed); only the answer's path exits.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import RenderableType
from textual import work
from textual.app import App
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

from mvp_tui.engine.ledger import LeaseLedger, money_text
from mvp_tui.tui.terminal import HangupSafeDriver, terminal_gone
from mvp_tui.widgets.confirm import Choice, ConfirmScreen

if TYPE_CHECKING:
    from mvp_tui.tui.run_mode import RunMode

# A closed terminal (SIGHUP) or a kill (SIGTERM): nobody can be asked, so the run is stopped
# with its leases destroyed, confirmed, before the app exits.
EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class ExitPath(App[int]):
    """The dashboard's exits; the app gives it `mode`, `ledger` and `live_leases`."""

    mode: RunMode
    ledger: LeaseLedger
    _wall: Callable[[], float]
    _exit_cleared = False  # set only on the paths that stopped the run first
    _quitting = False

    @property
    def live_leases(self) -> int:
        raise NotImplementedError

    @property
    def _holds_lease(self) -> bool:
        return self.mode.holds_lease or bool(self.live_leases)

    def exit(
        self,
        result: int | None = None,
        return_code: int = 0,
        message: RenderableType | None = None,
    ) -> None:
        """Every exit — ours, Textual's ctrl+q, the palette's Quit, `App.exit` from anywhere —
        asks first while something may bill; only the answer's path really exits."""
        if self._exit_cleared or not self._holds_lease:
            super().exit(result, return_code, message)
            return
        self.action_quit_app()

    async def action_quit(self) -> None:
        """Textual's own quit (ctrl+q, the command palette's Quit): the same question as q."""
        self.action_quit_app()

    def _leave(self, return_code: int, message: str | None = None) -> None:
        self._exit_cleared = True
        super().exit(return_code, return_code, message)

    def action_quit_app(self) -> None:
        if not self._holds_lease:
            self._leave(0)
            return
        if self._quitting:
            return
        self._quitting = True
        what = f"{self.live_leases} lease(s)" if self.live_leases else "A lease in progress"
        if self.ledger.rate():  # the ledger's figures: the ones the header shows
            now = self._wall()
            what += (f" (${self.ledger.rate():.2f}/h, {money_text(self.ledger.spent(now))} "
                     "so far)")
        self.push_screen(
            ConfirmScreen(
                "Quit with leases live?",
                f"{what} may be billing. Destroy them (confirmed by the provider), keep them "
                "running (see `mvp-tui ls` / `mvp-tui down`), or cancel.",
                [
                    Choice("cancel", "Cancel"),
                    Choice("keep", "Keep running", "warning"),
                    Choice("destroy", "Destroy and quit", "error"),
                ],
                focus="destroy",
                cancel_value="cancel",
            ),
            self._on_quit_choice,
        )

    def _on_quit_choice(self, choice: str | None) -> None:
        self._quitting = False
        if choice == "keep":
            self._stop_and_exit(destroy=False, reason="quit, leases kept")
        elif choice == "destroy":
            self._stop_and_exit(destroy=True, reason="quit")

    def exit_on_signal(self, sig: signal.Signals) -> None:
        # Nobody can be asked (a closed terminal, a kill): destroy, confirmed, then exit.
        if sig == signal.SIGHUP:
            terminal_gone()  # no write to the dead terminal may hold up the exit
        self._stop_and_exit(destroy=True, reason=f"{sig.name} received")

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this platform; on Linux the one that survives a hang-up."""
        driver = super().get_driver_class()
        return HangupSafeDriver if driver is LinuxDriver else driver

    @work(group="engine", name="teardown on quit", exit_on_error=False)
    async def _stop_and_exit(self, *, destroy: bool, reason: str) -> None:
        self._leave(await self.mode.exit_code_after_stop(self, destroy=destroy, reason=reason))

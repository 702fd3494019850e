"""The one full-screen dashboard: five panes, a status bar and a footer of keys."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Footer

from mvp_tui.config import Config
from mvp_tui.config.toml_file import write_key
from mvp_tui.keymap import APP_BINDINGS, KeyBinding
from mvp_tui.themes import APP_CSS_PATH, DARK_VARIABLES, THEMES
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.channels import ChannelsPane
from mvp_tui.widgets.confirm import Choice, ConfirmScreen
from mvp_tui.widgets.help_screen import HelpScreen
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.prompt import PromptPane
from mvp_tui.widgets.status_bar import RunSummary, StatusBar

# Tab order of the panes, as they sit on screen (left to right, top to bottom).
PANE_ORDER = ("offers-pane", "bootstrap-pane", "leases-pane", "channels-pane", "prompt-pane")


def _binding(spec: KeyBinding) -> Binding:
    # Pane cycling must win over any focused widget's own use of Tab.
    priority = spec.id in {"next-pane", "previous-pane"}
    return Binding(
        spec.keys, spec.action, spec.description, show=spec.show, id=spec.id, priority=priority
    )


class MvpApp(App[int]):
    """The dashboard. It knows the engine only through the events it is sent."""

    CSS_PATH = str(APP_CSS_PATH)
    TITLE = "mvp-tui"
    BINDINGS: ClassVar[list[BindingType]] = [_binding(spec) for spec in APP_BINDINGS]

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.config = config
        self._clock = clock
        super().__init__()
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = config.get_str("ui.theme") or THEMES[0].name
        if config.ui_keys:
            self.set_keymap(dict(config.ui_keys))
        self.live_leases = 0

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual themes of its own lack our semantic variables: fall back to the dark values.
        return dict(DARK_VARIABLES)

    def compose(self) -> ComposeResult:
        yield StatusBar(self._clock)
        yield OffersPane(provider=self.config.provider)
        yield BootstrapPane()
        yield LeasesPane()
        yield ChannelsPane()
        yield PromptPane()
        yield Footer()

    def on_mount(self) -> None:
        bar = self.query_one(StatusBar)
        cap = self.config.get_float("limits.max_spend_usd")
        bar.summary = RunSummary(
            run_id=self.config.get_str("runtime.run_id"),
            provider=self.config.provider,
            profile=self.config.profile,
            cap_usd=cap,
        )
        self.theme_changed_signal.subscribe(self, self._persist_theme)
        self.query_one("#offers-pane", Pane).focus()

    # -- panes -------------------------------------------------------------------------
    def _panes(self) -> list[Pane]:
        return [self.query_one(f"#{pane_id}", Pane) for pane_id in PANE_ORDER]

    def _current_pane_index(self) -> int:
        focused: Widget | None = self.focused
        panes = self._panes()
        while focused is not None:
            if focused in panes:
                return panes.index(focused)
            parent = focused.parent
            focused = parent if isinstance(parent, Widget) else None
        return -1

    def _focus_pane(self, step: int) -> None:
        panes = self._panes()
        index = self._current_pane_index()
        target = panes[(index + step) % len(panes)] if index >= 0 else panes[0]
        target.focus()

    def action_focus_next_pane(self) -> None:
        self._focus_pane(+1)

    def action_focus_previous_pane(self) -> None:
        self._focus_pane(-1)

    # -- keys ----------------------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen(list(APP_BINDINGS), dict(self.config.ui_keys)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Keys that need offers, a lease or an engine are shown dimmed until they make sense.
        if action in {"filter", "lease", "search_offers"}:
            return None
        if action == "teardown":
            return True if self.live_leases else None
        return True

    def action_filter(self) -> None:  # enabled once offers are listed
        pass

    def action_lease(self) -> None:  # enabled once offers are listed
        pass

    def action_search_offers(self) -> None:  # enabled once a provider is wired
        pass

    def action_teardown(self) -> None:  # enabled while a lease is live
        pass

    def action_toggle_theme(self) -> None:
        self.theme = "mvp-light" if self.theme == "mvp-dark" else "mvp-dark"

    def action_quit_app(self) -> None:
        if not self.live_leases:
            self.exit(0)
            return
        self.push_screen(
            ConfirmScreen(
                "Quit with leases live?",
                f"{self.live_leases} lease(s) may be billing. Destroy them (confirmed by the "
                "provider), keep them running (see `mvp-tui ls` / `mvp-tui down`), or cancel.",
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
        if choice == "keep":
            self.exit(3)
        elif choice == "destroy":
            self.exit(0)

    # -- config write-back -----------------------------------------------------------------
    def _persist_theme(self, theme: object) -> None:
        name = getattr(theme, "name", None)
        path = self.config.file
        if path is None or not isinstance(name, str) or name == self.config.get_str("ui.theme"):
            return
        try:
            write_key(path, "ui", "theme", name)
        except OSError as exc:
            self.notify(f"could not save [ui] theme to {path}: {exc.strerror}", severity="warning")

"""Which pane has the whole screen: none (the five-pane grid), the one the user zoomed (`z`,
as tmux and k9s do), or, in a terminal below about 100x30, the one the run's moment needs:
the Offers pane while choosing, the Bootstrap pane while a node comes up, the Prompt pane
while serving (so the answer's words are always on screen). Tab in a small terminal moves
the screen to the next pane. Pure: the app applies the answer as `-solo` classes."""

from __future__ import annotations

from dataclasses import dataclass

COMPACT_COLUMNS, COMPACT_ROWS = 100, 30
# By `RunState` value (engine/controller.py; the status says it as the event did).
PANE_FOR_STATE = {
    "leasing": "bootstrap-pane",
    "bringing up": "bootstrap-pane",
    "serving": "prompt-pane",
}
CHOOSING_PANE = "offers-pane"


def is_compact(width: int, height: int) -> bool:
    return width < COMPACT_COLUMNS or height < COMPACT_ROWS


@dataclass(slots=True)
class SoloLayout:
    """The zoom and the small terminal's choice; `solo()` says which pane shows alone."""

    zoomed: str | None = None  # a pane id: zoomed by the user, whatever the size
    picked: str | None = None  # a small terminal: the pane the user tabbed to
    _moment: str = CHOOSING_PANE  # the pane the run's state last asked for

    def toggle_zoom(self, pane_id: str) -> None:
        self.zoomed = None if self.zoomed is not None else pane_id

    def follow(self, state: str | None) -> None:
        """The run moved on: a small terminal shows what this moment needs again."""
        moment = PANE_FOR_STATE.get(state, CHOOSING_PANE) if state is not None else CHOOSING_PANE
        if moment != self._moment:
            self._moment, self.picked = moment, None

    def solo(self, width: int, height: int) -> str | None:
        if self.zoomed is not None:
            return self.zoomed
        if is_compact(width, height):
            return self.picked or self._moment
        return None

"""When the first full frame is on screen: the footer's keys are the last row Textual paints
(they are composed a refresh after the first frame, once the screen's bindings are known), so
work that loads libraries the first paint does not need waits for them."""

from __future__ import annotations

from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's footer; says once (`KeysShown`) when its keys have been painted. A change of
    bindings while a recompose is already queued queues no other: Textual's footer queues a
    whole recompose (every key widget made, mounted and styled again) per change, and the
    panes mounting and focus settling change them ~10 times before the first frame; the one
    queued reads the bindings as they are when it runs."""

    class KeysShown(Message):
        """The footer's keys went to the terminal: the first full frame is written."""

    _said = False
    _queued = False

    def bindings_changed(self, screen: Screen[object]) -> None:
        if self._queued:
            return
        super().bindings_changed(screen)  # queues a recompose when these hold:
        self._queued = screen.app.app_focus and self.is_attached and screen is self.screen

    async def recompose(self) -> None:
        self._queued = False  # a change from here on is read by a recompose after this one
        await super().recompose()
        if not self._said and self.children:
            self._said = True
            self.call_after_refresh(self.post_message, self.KeysShown())

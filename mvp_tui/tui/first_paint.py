"""When the first full frame is on screen: the footer's keys are the last row Textual paints
(they are composed a refresh after the first frame, once the screen's bindings are known), so
work that loads libraries the first paint does not need waits for them."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's footer; says once (`KeysShown`) when its keys have been painted."""

    class KeysShown(Message):
        """The footer's keys went to the terminal: the first full frame is written."""

    _said = False

    async def recompose(self) -> None:
        await super().recompose()
        if not self._said and self.children:
            self._said = True
            self.call_after_refresh(self.post_message, self.KeysShown())

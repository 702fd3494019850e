"""The prompt pane's engine side: a streaming OpenAI-compatible client, the one-at-a-time
queue shared with the seed's JSON-lines prompt RPC, and the events they emit. No Textual here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvp_tui.lazy_names import lazy_names

if TYPE_CHECKING:
    from mvp_tui.prompt.client import PromptClient
    from mvp_tui.prompt.events import (
        FaultKind,
        PromptCancelled,
        PromptDone,
        PromptFault,
        PromptQueued,
        PromptRpcListening,
        PromptSource,
        PromptStarted,
        TextDelta,
        is_end,
    )
    from mvp_tui.prompt.queue import PendingPrompt, PromptQueue
    from mvp_tui.prompt.rpc import DEFAULT_RPC_ADDR, PromptRpcServer, RpcAddr, parse_rpc_addr

# Names load on first use: the events and the queue's types must not load httpx.
_HOMES = {
    "PromptClient": "mvp_tui.prompt.client",
    "FaultKind": "mvp_tui.prompt.events",
    "PromptCancelled": "mvp_tui.prompt.events",
    "PromptDone": "mvp_tui.prompt.events",
    "PromptFault": "mvp_tui.prompt.events",
    "PromptQueued": "mvp_tui.prompt.events",
    "PromptRpcListening": "mvp_tui.prompt.events",
    "PromptSource": "mvp_tui.prompt.events",
    "PromptStarted": "mvp_tui.prompt.events",
    "TextDelta": "mvp_tui.prompt.events",
    "is_end": "mvp_tui.prompt.events",
    "PendingPrompt": "mvp_tui.prompt.queue",
    "PromptQueue": "mvp_tui.prompt.queue",
    "DEFAULT_RPC_ADDR": "mvp_tui.prompt.rpc",
    "PromptRpcServer": "mvp_tui.prompt.rpc",
    "RpcAddr": "mvp_tui.prompt.rpc",
    "parse_rpc_addr": "mvp_tui.prompt.rpc",
}

__all__ = [
    "DEFAULT_RPC_ADDR",
    "FaultKind",
    "PendingPrompt",
    "PromptCancelled",
    "PromptClient",
    "PromptDone",
    "PromptFault",
    "PromptQueue",
    "PromptQueued",
    "PromptRpcListening",
    "PromptRpcServer",
    "PromptSource",
    "PromptStarted",
    "RpcAddr",
    "TextDelta",
    "is_end",
    "parse_rpc_addr",
]


__getattr__ = lazy_names(__name__, _HOMES)

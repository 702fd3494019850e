"""The prompt pane's engine side: a streaming OpenAI-compatible client, the one-at-a-time
queue shared with the seed's JSON-lines prompt RPC, and the events they emit. No Textual here."""

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

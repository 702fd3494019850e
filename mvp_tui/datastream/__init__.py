"""The datastream: frames on named channels, the hub the UI polls, node-stdio bridge,
JSONL archive and replay. No Textual here; the widgets read the hub.

Modules: `frame` (Frame, StreamId), `channels` (names, validation), `hub` (ChannelHub),
`records` (the orchestrator's records and emitter), `frame_line` (the node agent's line
format), `bridge` (NodeBridge), `archive` (FrameArchive, read_archive), `display`
(display_text), `replay` (ReplaySource).
"""

from __future__ import annotations

from mvp_tui.datastream.archive import (
    ArchiveError,
    ArchiveRecord,
    FrameArchive,
    read_archive,
    read_frames,
)
from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.channels import (
    MVP_ORCH_BOOTSTRAP,
    MVP_ORCH_PROMPT,
    MVP_PROVISIONING_EVENTS,
    MVP_WORKER_WEIGHTS,
    ChannelNameError,
    LogStream,
    node_log_channel,
    validate_channel,
)
from mvp_tui.datastream.display import display_text
from mvp_tui.datastream.frame import Frame, StreamId, node_stream, orchestrator_stream
from mvp_tui.datastream.frame_line import encode_frame_line, parse_frame_line
from mvp_tui.datastream.hub import ChannelHub, ChannelLimitError, ChannelStats, HubSnapshot, Tail
from mvp_tui.datastream.records import OrchestratorEmitter, ProvisionEventKind, StepStatus
from mvp_tui.datastream.replay import ReplaySource

__all__ = [
    "MVP_ORCH_BOOTSTRAP",
    "MVP_ORCH_PROMPT",
    "MVP_PROVISIONING_EVENTS",
    "MVP_WORKER_WEIGHTS",
    "ArchiveError",
    "ArchiveRecord",
    "ChannelHub",
    "ChannelLimitError",
    "ChannelNameError",
    "ChannelStats",
    "Frame",
    "FrameArchive",
    "HubSnapshot",
    "LogStream",
    "NodeBridge",
    "OrchestratorEmitter",
    "ProvisionEventKind",
    "ReplaySource",
    "StepStatus",
    "StreamId",
    "Tail",
    "display_text",
    "encode_frame_line",
    "node_log_channel",
    "node_stream",
    "orchestrator_stream",
    "parse_frame_line",
    "read_archive",
    "read_frames",
    "validate_channel",
]

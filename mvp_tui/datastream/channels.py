"""Channel names: the seed's fixed ones, per-node log channels, and what a well-formed name is.

A name is dot-separated segments of ASCII letters, digits, `_` and `-` (at most
`MAX_CHANNEL_CHARS`). Names under the engine's own prefixes (`mvp.orch.`,
`mvp.provisioning.`) are written by the engine only: a node cannot forge them.
"""

from __future__ import annotations

import enum
import re

from mvp_tui.node_protocol import WEIGHTS_CHANNEL

MVP_ORCH_BOOTSTRAP = "mvp.orch.bootstrap"
MVP_ORCH_PROMPT = "mvp.orch.prompt"
MVP_ORCH_EVENTS = "mvp.orch.events"  # the engine's events the panes read (not the seed's)
MVP_PROVISIONING_EVENTS = "mvp.provisioning.events"
MVP_PROVISIONING_LOGS = "mvp.provisioning.logs"
MVP_WORKER_WEIGHTS = WEIGHTS_CHANNEL  # the node protocol's (mvp_tui/node_protocol.py)

NODE_LOG_PREFIX = "mvp.provisioning.logs.node."
ENGINE_ONLY_PREFIXES = ("mvp.orch.", "mvp.provisioning.")
MAX_CHANNEL_CHARS = 128

_WELL_FORMED = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")


class ChannelNameError(ValueError):
    """A channel name that is not well formed, or one a node may not write."""


class LogStream(enum.Enum):
    """Which line stream a provisioning log line came from; values are the seed's names."""

    STDOUT = "Stdout"
    STDERR = "Stderr"
    PROVIDER = "Provider"

    @property
    def suffix(self) -> str:
        """The channel suffix: `stdout`, `stderr` or `provider`."""
        return self.value.lower()


def node_log_channel(node_id: int, kind: LogStream | str) -> str:
    """`mvp.provisioning.logs.node.<N>.<stdout|stderr|provider>` (the seed's log channel)."""
    stream = kind if isinstance(kind, LogStream) else log_stream(kind)
    return f"{NODE_LOG_PREFIX}{int(node_id)}.{stream.suffix}"


_BY_SUFFIX = {stream.value.lower(): stream for stream in LogStream}


def log_stream(kind: str) -> LogStream:
    """`"stdout"` / `"stderr"` / `"provider"` (any case) as a LogStream."""
    stream = _BY_SUFFIX.get(kind) or _BY_SUFFIX.get(kind.lower())
    if stream is None:
        raise ChannelNameError(f"log stream {kind!r} is not one of stdout, stderr, provider")
    return stream


def validate_channel(name: str) -> str:
    """`name` when well formed; otherwise ChannelNameError saying what is wrong and the fix."""
    if not name:
        raise ChannelNameError("channel name is empty; fix: use dotted segments like 'mvp.a.b'")
    if len(name) > MAX_CHANNEL_CHARS:
        raise ChannelNameError(
            f"channel name {name[:40]!r}… is {len(name)} chars; "
            f"fix: keep channel names within {MAX_CHANNEL_CHARS} chars"
        )
    if not _WELL_FORMED.fullmatch(name):
        raise ChannelNameError(
            f"channel name {name[:MAX_CHANNEL_CHARS]!r} is malformed; fix: use dot-separated "
            "segments of letters, digits, '_' or '-' (e.g. 'mvp.node.1.agent')"
        )
    return name


def validate_node_channel(name: str) -> str:
    """Like `validate_channel`, and also refuses the engine-only prefixes to a node."""
    validate_channel(name)
    if name.startswith(ENGINE_ONLY_PREFIXES):
        raise ChannelNameError(
            f"channel {name!r} is written by the engine only; fix: the node agent uses its "
            f"own channels (e.g. 'mvp.node.<N>.agent', {MVP_WORKER_WEIGHTS!r})"
        )
    return name


def is_node_log_channel(name: str) -> bool:
    """Whether `name` is a per-node provisioning log channel (payload = a log record)."""
    return name.startswith(NODE_LOG_PREFIX)

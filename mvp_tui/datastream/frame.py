"""The unit of the datastream: one payload on one channel of one stream, at one position."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class StreamId:
    """Who produced a frame: a node (or the orchestrator) in one lifetime (the run id).

    Shown and archived as `node#lifetime`, the seed's form.
    """

    node: str
    lifetime: int

    def __str__(self) -> str:
        return f"{self.node}#{self.lifetime}"

    @classmethod
    def parse(cls, text: str) -> StreamId:
        """Read `node#lifetime` back; ValueError naming the text when it is not that shape."""
        node, sep, lifetime = text.rpartition("#")
        if not sep or not node or not lifetime.isdigit():
            raise ValueError(f"stream id {text!r} is not of the form 'node#lifetime'")
        return cls(node, int(lifetime))


ORCHESTRATOR_NODE = "mvp-orchestrator"


def orchestrator_stream(run_id: int) -> StreamId:
    """The engine's own stream for a run (the seed's `mvp-orchestrator#<run>`)."""
    return StreamId(ORCHESTRATOR_NODE, run_id)


def node_stream(run_id: int, node_id: int) -> StreamId:
    """A node's stream for a run (the seed's `node_stream_id`: `<node>#<run>`)."""
    return StreamId(str(node_id), run_id)


class Frame(NamedTuple):
    """One payload on a channel. `position` is monotonic per channel; payload is raw bytes.

    Immutable and without a `__dict__` like a frozen slotted dataclass, but a NamedTuple:
    it is built once per frame on the ingest path, where it costs half as much.
    """

    stream: StreamId
    channel: str
    position: int
    payload: bytes

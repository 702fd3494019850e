"""Watches the node's `mvp.worker.weights` channel for the engine's verdict.

The node agent reports `WeightsLoaded` once its engine answers and `WorkerFatal` when the
node cannot serve; this turns those frames into an asyncio event the run waits on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.node_protocol import (
    WEIGHTS_CHANNEL,
    WEIGHTS_LOADED,
    WORKER_FATAL,
    int_field,
    parse_record,
    record_type,
)
from mvp_tui.untrusted import clean_line


@dataclass(frozen=True, slots=True)
class WeightsLoaded:
    model_id: str
    engine: str
    base_url: str  # as the node sees it, e.g. http://127.0.0.1:PORT
    port: int
    load_ms: int | None
    auth: str = "none"  # "key": the node's gate checks the run's key
    idle_stop_mins: float | None = None  # the node's idle stop, armed; None: off
    slots: int = 0  # requests the engine serves at once (0: unknown)


@dataclass(frozen=True, slots=True)
class WorkerFatal:
    reason: str
    fix: str
    scope: str = "host"  # "host": another host may serve; "run": every host would fail
    phase: str = ""  # the agent's phase that failed (probe, model, engine_health, ...)


class NodeWatch:
    """A hub listener: `ready` is set on WeightsLoaded or WorkerFatal (see `verdict`).

    With `stream`, only that node's WeightsLoaded counts: in a multi-node run every node
    writes `mvp.worker.weights`, and a worker must not be able to declare the main node ready
    (with a port of its choosing). Another node's WorkerFatal fails the run named as that
    node's, never as the main's."""

    def __init__(
        self, redact: Callable[[str], str] | None = None, stream: StreamId | None = None
    ) -> None:
        self._redact = redact
        self.stream = stream
        self.ready = asyncio.Event()
        self.failed = asyncio.Event()  # WorkerFatal at any time, before or after ready
        self.loaded: WeightsLoaded | None = None
        self.fatal: WorkerFatal | None = None

    def __call__(self, frame: Frame) -> None:
        if frame.channel != WEIGHTS_CHANNEL:
            return
        record = parse_record(frame.payload)
        kind = record_type(record)
        other = self.stream is not None and frame.stream != self.stream
        if kind == WEIGHTS_LOADED and self.loaded is None and not other:
            self.loaded = _loaded(record, self._redact)
            self.ready.set()
        elif kind == WORKER_FATAL:
            reason = clean_line(
                str(record.get("reason") or "the node failed"), 600, redact=self._redact
            )
            # Another node's failure fails the run too, but as its own, never as the main's.
            who = f"worker node {clean_line(frame.stream.node, 20)}: " if other else ""
            self.fatal = WorkerFatal(
                reason=who + reason,
                fix=clean_line(str(record.get("fix") or ""), 300, redact=self._redact),
                scope="run" if record.get("scope") == "run" else "host",
                phase=clean_line(str(record.get("phase") or ""), 40),
            )
            self.ready.set()
            self.failed.set()

    def reset(self) -> None:
        self.ready.clear()
        self.failed.clear()
        self.loaded = None
        self.fatal = None


MAX_SLOTS = 64  # [model] parallel's maximum: a node's larger figure is read as that


def _loaded(record: dict[str, Any], redact: Callable[[str], str] | None) -> WeightsLoaded:
    return WeightsLoaded(
        model_id=clean_line(str(record.get("model_id") or ""), 200, redact=redact),
        engine=clean_line(str(record.get("engine") or ""), 100, redact=redact),
        base_url=clean_line(str(record.get("base_url") or ""), 300, redact=redact),
        port=int_field(record, "port") or 0,
        load_ms=int_field(record, "load_ms"),
        auth="key" if record.get("auth") == "key" else "none",
        idle_stop_mins=_minutes(record.get("idle_stop_mins")),
        # The record's `parallel`: the engine's slots (a word the node's 3.8 code can use).
        slots=min(max(int_field(record, "parallel") or 0, 0), MAX_SLOTS),
    )


def _minutes(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value < 1e9 else None

"""The engine's one port to the outside: typed, immutable events and the sink that takes them.

The dashboard turns each event into a Textual message; headless mode prints each as one JSON
line. Each area (lease walk, bootstrap, prompt, …) defines its own event classes next to its
code by subclassing `EngineEvent`; this module only holds what they share.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineEvent:
    """Base of every engine event. `at` is the engine's clock (Unix seconds)."""

    at: float = field(default=0.0)
    kind: ClassVar[str] = "event"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # No super() call: slots=True re-creates the class, which breaks the zero-argument
        # form, and object.__init_subclass__ has nothing to do.
        # Event names in JSON are the class name in snake case: LeaseRunning -> lease_running.
        cls.kind = _CAMEL.sub("_", cls.__name__).lower()

    def to_dict(self) -> dict[str, Any]:
        body = {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return {"event": self.kind, **body}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=False)


EventSink = Callable[[EngineEvent], None]
"""Where the engine emits. Called on the engine's loop; must not block."""


class RecordingSink:
    """A sink that keeps every event, for tests and for replaying a run's history."""

    def __init__(self) -> None:
        self.events: list[EngineEvent] = []

    def __call__(self, event: EngineEvent) -> None:
        self.events.append(event)

    def of(self, cls: type[EngineEvent]) -> list[EngineEvent]:
        return [e for e in self.events if isinstance(e, cls)]

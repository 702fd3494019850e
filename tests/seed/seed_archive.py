"""A small reader of the seed's datastream archive, written only from the seed's documented
record shapes (shared/seeds/002_…txt: `FrameArchive::record`, `OrchDatastream::emit_*`,
`MvpProvisionEventRecord`, `MvpProvisionLogRecord`), not from the app's code: what a script
written against the seed would do with an archive of this app.

- archive line: `{"arrival_seq", "source", "stream", "channel", "position",
  "payload": {"encoding": "utf8", "value": text} | {"encoding": "bytes", "value": [ints]}}`
- `mvp.orch.bootstrap`: `{"type": "OrchBootstrap", "phase", "status", "run_id", "node_id",
  "detail"}`; `mvp.orch.prompt`: `{"type": "OrchPromptEvent", …, "request_id", "detail"}`
- `mvp.provisioning.events`: `{"event": {"run_id", "node_id", "kind", "provider", "message"}}`
- `mvp.provisioning.logs.node.<N>.<stream>`: `{"line": {"run_id", "node_id", "stream",
  "line"}}`
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARCHIVE_KEYS = {"arrival_seq", "source", "stream", "channel", "position", "payload"}
SEED_PHASES = (
    "config",
    "provider_start",
    "node_runtime_ready",
    "weights_loaded",
    "prompt_rpc",
    "serve_prompts",
    "shutdown",
    "provider_stop",
    "orch_exit",
)
SEED_STATUSES = {"started", "ready", "failed"}
PROVISION_KINDS = {"ProvisionStart", "NodeLive", "ProvisionFailed", "NodeStopped"}


@dataclass(frozen=True)
class SeedRecord:
    seq: int
    source: str
    stream: str
    channel: str
    position: int
    payload: Any  # the decoded JSON when the payload is UTF-8 JSON text, else the raw value


def read_seed_archive(path: Path) -> list[SeedRecord]:
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        raw = json.loads(line)
        assert set(raw) == ARCHIVE_KEYS, (number, raw)
        assert raw["arrival_seq"] == number, "arrival_seq counts lines from 0"
        name, _, lifetime = raw["stream"].rpartition("#")
        assert name and lifetime.isdigit(), raw["stream"]
        assert isinstance(raw["position"], int) and raw["position"] >= 0
        payload = raw["payload"]
        assert payload["encoding"] in ("utf8", "bytes"), payload
        value: Any = payload["value"]
        if payload["encoding"] == "utf8":
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        records.append(
            SeedRecord(
                raw["arrival_seq"],
                raw["source"],
                raw["stream"],
                raw["channel"],
                raw["position"],
                value,
            )
        )
    return records


def on(records: list[SeedRecord], channel: str) -> list[SeedRecord]:
    return [r for r in records if r.channel == channel]

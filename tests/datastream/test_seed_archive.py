"""The seed's two frame-archive tests (orchestrator.rs), ported with the same inputs and
the same expected records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mvp_tui.datastream.archive import FrameArchive
from mvp_tui.datastream.channels import LogStream
from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.records import OrchestratorEmitter


def _records(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_frame_archive_writes_jsonl_records_for_text_and_binary_payloads(tmp_path: Path) -> None:
    path = tmp_path / "mvp-frame-archive-test.jsonl"
    stream = StreamId("test-node", 42)
    archive = FrameArchive(path)
    archive.record("orchestrator", Frame(stream, "stdout", 7, b"hello \xce\xbb"))
    archive.record("orchestrator", Frame(stream, "stderr", 8, bytes([0xFF, 0x00, ord("A")])))
    archive.close()

    assert _records(path) == [
        {
            "arrival_seq": 0,
            "source": "orchestrator",
            "stream": "test-node#42",
            "channel": "stdout",
            "position": 7,
            "payload": {"encoding": "utf8", "value": "hello λ"},
        },
        {
            "arrival_seq": 1,
            "source": "orchestrator",
            "stream": "test-node#42",
            "channel": "stderr",
            "position": 8,
            "payload": {"encoding": "bytes", "value": [255, 0, 65]},
        },
    ]


def test_orchestrator_stdio_drain_archives_stdout_and_stderr_as_provision_logs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mvp-orch-stdio-test.jsonl"
    lines = [(LogStream.STDOUT, "offer pool selected"), (LogStream.STDERR, "lease chain detail")]

    archive = FrameArchive(path)
    emitter = OrchestratorEmitter(ChannelHub(archive=archive), run_id=77, node_id=9)
    for stream, line in lines:  # the seed's drain_orch_stdio_capture
        emitter.emit_log(stream, line)
    archive.close()

    records = _records(path)
    stdout_record = next(
        r for r in reversed(records) if r["channel"] == "mvp.provisioning.logs.node.9.stdout"
    )
    stderr_record = next(
        r for r in reversed(records) if r["channel"] == "mvp.provisioning.logs.node.9.stderr"
    )
    assert stdout_record["source"] == "orchestrator"
    assert stderr_record["source"] == "orchestrator"

    assert stdout_record["payload"]["encoding"] == "utf8"
    assert stderr_record["payload"]["encoding"] == "utf8"
    stdout_payload = json.loads(stdout_record["payload"]["value"])
    stderr_payload = json.loads(stderr_record["payload"]["value"])
    assert stdout_payload["line"]["run_id"] == 77
    assert stdout_payload["line"]["node_id"] == 9
    assert stdout_payload["line"]["stream"] == "Stdout"
    assert stdout_payload["line"]["line"] == "offer pool selected"
    assert stderr_payload["line"]["stream"] == "Stderr"
    assert stderr_payload["line"]["line"] == "lease chain detail"

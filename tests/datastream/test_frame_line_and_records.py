"""The node frame-line format and the orchestrator's records in the seed's shapes."""

from __future__ import annotations

import json

import pytest

from mvp_tui.datastream.channels import (
    ChannelNameError,
    LogStream,
    node_log_channel,
    validate_channel,
    validate_node_channel,
)
from mvp_tui.datastream.frame import StreamId
from mvp_tui.datastream.frame_line import FrameLineError, encode_frame_line, parse_frame_line
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.records import OrchestratorEmitter, ProvisionEventKind, StepStatus
from mvp_tui.secrets import Redactor


def test_encode_frame_line_is_compact_ascii_in_the_agreed_key_order() -> None:
    line = encode_frame_line("mvp.node.1.agent", {"phase": "probe", "gpu": "RTX λ"})
    assert line == (
        '{"mvp_frame":1,"channel":"mvp.node.1.agent",'
        '"payload":{"phase":"probe","gpu":"RTX \\u03bb"}}'
    )
    assert line.isascii()
    assert "\n" not in encode_frame_line("c", "two\nlines")


@pytest.mark.parametrize(
    "payload", ["text λ", {"a": [1, 2.5, None, True]}, [1, "x"], 42, None, False, ""]
)
def test_frame_lines_round_trip_to_the_payload_bytes_rule(payload: object) -> None:
    parsed = parse_frame_line(encode_frame_line("mvp.worker.weights", payload))
    assert parsed.channel == "mvp.worker.weights"
    if isinstance(payload, str):
        assert parsed.payload == payload.encode()
    else:
        assert json.loads(parsed.payload) == payload
        assert b" " not in parsed.payload


def test_encode_refuses_bad_channels_and_nan() -> None:
    with pytest.raises(ChannelNameError, match="malformed"):
        encode_frame_line("a..b", 1)
    with pytest.raises(ValueError):
        encode_frame_line("a.b", float("nan"))


def test_parse_reports_what_is_wrong() -> None:
    with pytest.raises(FrameLineError, match="not valid JSON"):
        parse_frame_line('{"mvp_frame":1,"channel":"a","payload":}')
    with pytest.raises(FrameLineError, match="no payload"):
        parse_frame_line('{"mvp_frame":1,"channel":"a"}')


def test_channel_names() -> None:
    assert node_log_channel(3, "stdout") == "mvp.provisioning.logs.node.3.stdout"
    assert node_log_channel(3, LogStream.PROVIDER) == "mvp.provisioning.logs.node.3.provider"
    assert validate_channel("mvp.node.12.engine") == "mvp.node.12.engine"
    for bad in ["", ".a", "a.", "a b", "a/b", "é", "x" * 129, "a\x1b[31m"]:
        with pytest.raises(ChannelNameError, match="fix"):
            validate_channel(bad)
    with pytest.raises(ChannelNameError, match="engine only"):
        validate_node_channel("mvp.orch.prompt")


def test_emit_bootstrap_writes_the_seeds_record_on_the_bootstrap_channel() -> None:
    hub = ChannelHub()
    emitter = OrchestratorEmitter(hub, run_id=41, node_id=9)
    frame = emitter.emit_bootstrap("config", StepStatus.READY, {"provider": "vastai"})
    assert frame.channel == "mvp.orch.bootstrap"
    assert frame.stream == StreamId("mvp-orchestrator", 41)
    assert json.loads(frame.payload) == {
        "type": "OrchBootstrap",
        "phase": "config",
        "status": "ready",
        "run_id": 41,
        "node_id": 9,
        "detail": {"provider": "vastai"},
    }
    with pytest.raises(ValueError, match="started, ready or failed"):
        emitter.emit_bootstrap("config", StepStatus.OBSERVED)
    words = emitter.emit_bootstrap("engine_health", "failed", {"error": "503"})
    assert json.loads(words.payload)["status"] == "failed"
    with pytest.raises(ValueError, match="'done' is not one of started, ready"):
        emitter.emit_bootstrap("config", "done")


def test_prompt_event_and_log_records_match_the_seed() -> None:
    hub = ChannelHub()
    emitter = OrchestratorEmitter(hub, run_id=41, node_id=9)
    prompt = emitter.emit_prompt(
        5, "node_prompt_event", StepStatus.OBSERVED, {"event": "TextDelta"}
    )
    assert prompt.channel == "mvp.orch.prompt"
    assert json.loads(prompt.payload) == {
        "type": "OrchPromptEvent",
        "phase": "node_prompt_event",
        "status": "observed",
        "run_id": 41,
        "node_id": 9,
        "request_id": 5,
        "detail": {"event": "TextDelta"},
    }
    event = emitter.emit_event(ProvisionEventKind.NODE_STOPPED, provider="local", node_id=2)
    assert event.channel == "mvp.provisioning.events"
    assert json.loads(event.payload) == {
        "event": {
            "run_id": 41,
            "node_id": 2,
            "kind": "NodeStopped",
            "provider": "local",
            "message": None,
        }
    }
    log = emitter.emit_log(LogStream.PROVIDER, "ssh attempt 1")
    assert log.channel == "mvp.provisioning.logs.node.9.provider"
    assert json.loads(log.payload) == {
        "line": {"run_id": 41, "node_id": 9, "stream": "Provider", "line": "ssh attempt 1"}
    }


def test_emitter_redacts_secrets_in_details() -> None:
    key = "vast-api-key-0123456789"
    emitter = OrchestratorEmitter(ChannelHub(), run_id=1, node_id=1, redactor=Redactor([key]))
    frame = emitter.emit_bootstrap("config", StepStatus.FAILED, {"error": f"401 for key {key}"})
    assert key.encode() not in frame.payload
    assert json.loads(frame.payload)["detail"]["error"] == "401 for key <redacted>"

"""NodeBridge: a node's stdio lines become frames on channels, untrusted input never hurts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.text import Text

from mvp_tui.datastream.archive import FrameArchive, read_archive
from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.display import display_text
from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.datastream.frame_line import encode_frame_line
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.secrets import Redactor

STDOUT = "mvp.provisioning.logs.node.3.stdout"
STDERR = "mvp.provisioning.logs.node.3.stderr"
PROVIDER = "mvp.provisioning.logs.node.3.provider"


@pytest.fixture
def hub() -> ChannelHub:
    return ChannelHub()


@pytest.fixture
def bridge(hub: ChannelHub) -> NodeBridge:
    return NodeBridge(hub, 3, StreamId("3", 77))


def log_line(frame: Frame) -> dict[str, object]:
    record = json.loads(frame.payload)
    assert set(record) == {"line"}
    inner = record["line"]
    assert isinstance(inner, dict)
    return inner


def test_frame_line_becomes_a_frame_on_its_channel(bridge: NodeBridge, hub: ChannelHub) -> None:
    weights = {"type": "WeightsLoaded", "model_id": "m", "bytes": 12}
    frame = bridge.feed_line(
        "stdout", (encode_frame_line("mvp.worker.weights", weights) + "\n").encode()
    )
    assert frame.channel == "mvp.worker.weights"
    assert json.loads(frame.payload) == weights
    assert frame.payload == b'{"type":"WeightsLoaded","model_id":"m","bytes":12}'  # compact
    assert frame.stream == StreamId("3", 77)
    text = bridge.feed_line("stdout", encode_frame_line("mvp.node.3.engine", "llama λ ok").encode())
    assert text.channel == "mvp.node.3.engine"
    assert text.payload == "llama λ ok".encode()  # a string payload is its UTF-8, unquoted
    assert hub.channels() == ["mvp.node.3.engine", "mvp.worker.weights"]


def test_plain_lines_become_the_seeds_log_records(bridge: NodeBridge) -> None:
    out = bridge.feed_line("stdout", b"downloading model\r\n")
    err = bridge.feed_line("stderr", b"warning: slow disk\n")
    assert out.channel == STDOUT
    assert err.channel == STDERR
    assert log_line(out) == {
        "run_id": 77,
        "node_id": 3,
        "stream": "Stdout",
        "line": "downloading model",
    }
    assert log_line(err) == {
        "run_id": 77,
        "node_id": 3,
        "stream": "Stderr",
        "line": "warning: slow disk",
    }
    # Exactly the seed's serialisation (serde field order, compact).
    assert out.payload == (
        b'{"line":{"run_id":77,"node_id":3,"stream":"Stdout","line":"downloading model"}}'
    )


def test_on_line_is_feed_line_as_a_line_handler(bridge: NodeBridge, hub: ChannelHub) -> None:
    handler: Callable[[str, bytes], None] = bridge.on_line  # the local provider's LineHandler
    handler("stdout", encode_frame_line("mvp.node.3.agent", {"p": 1}).encode())
    handler("stderr", b"oops")
    assert hub.channels() == ["mvp.node.3.agent", STDERR]


def test_provider_lines_go_to_the_provider_channel(bridge: NodeBridge) -> None:
    frame = bridge.feed_provider_line("ssh attempt 2 to 1.2.3.4:22: refused; next in 2 s")
    assert frame.channel == PROVIDER
    assert log_line(frame)["stream"] == "Provider"


def test_frame_lines_on_stderr_are_only_logs(bridge: NodeBridge) -> None:
    line = encode_frame_line("mvp.worker.weights", {"type": "WeightsLoaded"})
    frame = bridge.feed_line("stderr", line.encode())
    assert frame.channel == STDERR
    assert log_line(frame)["line"] == line


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"mvp_frame":1,"channel":"mvp.node.3.agent","payload":{"a":1}', "JSON"),
        ('{"mvp_frame":1,"channel":"bad name!","payload":1}', "malformed"),
        ('{"mvp_frame":1,"channel":"","payload":1}', "empty"),
        (
            '{"mvp_frame":1,"channel":"mvp.orch.bootstrap","payload":{"status":"ready"}}',
            "engine only",
        ),
        ('{"mvp_frame":1,"channel":"mvp.provisioning.events","payload":1}', "engine only"),
        ('{"mvp_frame":2,"channel":"mvp.node.3.agent","payload":1}', "mvp_frame=2"),
        ('{"mvp_frame":true,"channel":"mvp.node.3.agent","payload":1}', "mvp_frame=True"),
        ('{"mvp_frame":1,"channel":7,"payload":1}', "not a string"),
        ('{"mvp_frame":1,"channel":"mvp.node.3.agent"}', "no payload"),
        ('{"note":"mvp_frame"}', "mvp_frame=None"),
        ('{"mvp_frame":1,"channel":"mvp.node.3.agent","payload":1}]', "JSON"),
    ],
)
def test_a_malformed_frame_line_is_kept_as_a_stdout_log_line(
    bridge: NodeBridge, hub: ChannelHub, line: str, why: str
) -> None:
    frame = bridge.feed_line("stdout", line.encode())
    assert frame.channel == STDOUT
    assert log_line(frame)["line"] == line
    assert bridge.rejected == 1
    assert bridge.last_rejection is not None and why in bridge.last_rejection
    assert hub.channels() == [STDOUT]


def test_a_node_cannot_open_more_channels_than_the_hub_allows() -> None:
    hub = ChannelHub(max_channels=3)
    bridge = NodeBridge(hub, 3, StreamId("3", 77))
    names = [f"mvp.node.3.c{i}" for i in range(5)]
    frames = [
        bridge.feed_line("stdout", encode_frame_line(n, i).encode()) for i, n in enumerate(names)
    ]
    assert [f.channel for f in frames] == [*names[:3], STDOUT, STDOUT]
    assert bridge.rejected == 2


def test_noncanonical_but_valid_frame_lines_are_accepted(bridge: NodeBridge) -> None:
    spaced = '{ "payload" : {"b": [1, 2]}, "channel": "mvp.node.3.agent", "mvp_frame": 1, "x": 0 }'
    frame = bridge.feed_line("stdout", spaced.encode())
    assert frame.channel == "mvp.node.3.agent"
    assert frame.payload == b'{"b":[1,2]}'
    canonical_spaced = '{"mvp_frame":1,"channel":"mvp.node.3.agent","payload":{"b": "x y"}}'
    assert bridge.feed_line("stdout", canonical_spaced.encode()).payload == b'{"b":"x y"}'


def test_invalid_utf8_is_kept_as_bytes_in_the_archive_and_replaced_on_screen(
    tmp_path: Path,
) -> None:
    archive = FrameArchive(tmp_path / "frames.jsonl")
    bridge = NodeBridge(ChannelHub(archive=archive), 3, StreamId("3", 77))
    raw = b"gpu \xff\xfe temp 80\xc3"
    frame = bridge.feed_line("stdout", raw + b"\n")
    archive.close()

    assert raw in frame.payload  # the node's exact bytes, inside the log record
    [record] = read_archive(tmp_path / "frames.jsonl")
    assert record.frame.payload == frame.payload
    stored = json.loads((tmp_path / "frames.jsonl").read_text())
    assert stored["payload"]["encoding"] == "bytes"
    assert display_text(frame) == "gpu \ufffd\ufffd temp 80\ufffd"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"\x1b[31mred\x1b[0m text", "red text"),
        (b"see \x1b]8;;http://evil.example/\x07link\x1b]8;;\x07 here", "see link here"),
        ("a\u009b31mb".encode(), "ab"),  # 8-bit CSI
        (b"ding\x07dong", "dingdong"),
        (b"tab\tkept", "tab\tkept"),
    ],
)
def test_display_strips_escape_and_control_sequences(
    bridge: NodeBridge, raw: bytes, shown: str
) -> None:
    assert display_text(bridge.feed_line("stdout", raw)) == shown
    assert display_text(bridge.feed_line("stderr", raw)) == shown


def test_display_strips_escapes_inside_frame_payloads(bridge: NodeBridge) -> None:
    frame = bridge.feed_line(
        "stdout", encode_frame_line("mvp.node.3.engine", "\x1b[1mload\x1b[0m\x07").encode()
    )
    assert display_text(frame) == "load"


def test_rich_markup_from_a_node_stays_literal_text(bridge: NodeBridge) -> None:
    frame = bridge.feed_line("stdout", b"[bold]x[/] [link=http://a]y[/link]")
    shown = display_text(frame)
    assert shown == "[bold]x[/] [link=http://a]y[/link]"
    rendered = Text(shown)  # how the widget renders it
    assert rendered.plain == shown
    assert rendered.spans == []


def test_overlong_lines_are_cut_with_a_marker(hub: ChannelHub) -> None:
    bridge = NodeBridge(hub, 3, StreamId("3", 77), max_line_bytes=1000)
    frame = bridge.feed_line("stdout", b"a" * 999 + "λ".encode() * 501)  # 2001 bytes
    line = log_line(frame)["line"]
    assert line == "a" * 999 + " … [cut 1002 bytes]"  # cut before a λ, never through it
    long_frame = encode_frame_line("mvp.node.3.engine", "z" * 5000).encode()
    cut = bridge.feed_line("stdout", long_frame)
    assert cut.channel == STDOUT  # a cut frame line is no longer a frame
    assert display_text(cut, 10_000).endswith(f"[cut {len(long_frame) - 1000} bytes]")


def test_default_line_limit_is_64_kib(hub: ChannelHub) -> None:
    bridge = NodeBridge(hub, 3, StreamId("3", 77))
    frame = bridge.feed_line("stderr", b"x" * 70_000)
    line = log_line(frame)["line"]
    assert isinstance(line, str)
    assert line == "x" * 65_536 + " … [cut 4464 bytes]"


def test_secrets_are_redacted_from_frames_and_logs(hub: ChannelHub) -> None:
    secret = "hf_SECRETTOKEN123456"
    bridge = NodeBridge(hub, 3, StreamId("3", 77), redactor=Redactor([secret]))
    logged = bridge.feed_line("stderr", f"auth with {secret} failed".encode())
    framed = bridge.feed_line(
        "stdout", encode_frame_line("mvp.node.3.agent", {"token": secret}).encode()
    )
    provided = bridge.feed_provider_line(f"env HF_TOKEN={secret}")
    for frame in (logged, framed, provided):
        assert secret.encode() not in frame.payload
        assert b"<redacted>" in frame.payload
    assert framed.channel == "mvp.node.3.agent"


def test_run_id_defaults_to_the_stream_lifetime_and_can_be_given(hub: ChannelHub) -> None:
    default = NodeBridge(hub, 4)
    assert default.stream == StreamId("4", 0)
    explicit = NodeBridge(hub, 4, StreamId("mvp-orchestrator", 9), run_id=9)
    assert log_line(explicit.feed_line("stdout", b"x"))["run_id"] == 9


def test_unknown_stream_kind_is_a_clear_error(bridge: NodeBridge) -> None:
    with pytest.raises(ValueError, match="stdout, stderr, provider"):
        bridge.feed_line("stdin", b"x")


def test_the_node_agents_encoder_writes_the_checked_encoders_lines(bridge: NodeBridge) -> None:
    """The agent writes with node_protocol's encoder; the app's adds only the channel check."""
    from mvp_tui.node_protocol import frame_line

    for channel, payload in [
        ("mvp.node.3.agent", {"type": "NodeAgentPhase", "phase": "probe", "gpu": "RTX λ"}),
        ("mvp.node.3.engine", "llama_model_loader: \x1b[1mloaded\x1b[0m"),
        ("mvp.worker.weights", {"type": "WeightsLoaded", "detail": [1, None, True]}),
    ]:
        line = frame_line(channel, payload)
        assert line == encode_frame_line(channel, payload)
        frame = bridge.feed_line("stdout", line.encode() + b"\n")
        assert frame.channel == channel

"""The node protocol has one home (mvp_tui/node_protocol.py): the agent carries its block
verbatim, and no other shipped module types a node channel's or an agent record's name."""

from __future__ import annotations

import ast
from pathlib import Path

from mvp_tui import node_protocol

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "mvp_tui" / "node_protocol.py"
AGENT = ROOT / "mvp_tui" / "node_agent.py"
SHIPPED = ("mvp_tui", "providers", "widgets", "themes")
BEGIN, END = "# --- node protocol: begin", "# --- node protocol: end ---\n"

CHANNEL_PREFIXES = ("mvp.node.", "mvp.worker.")
RECORD_NAMES = frozenset(
    {
        node_protocol.NODE_AGENT_PHASE,
        node_protocol.NODE_AGENT_PROGRESS,
        node_protocol.NODE_AGENT_NOTICE,
        node_protocol.WEIGHTS_LOADED,
        node_protocol.WORKER_FATAL,
        node_protocol.RPC_SERVER_READY,
    }
)


def _block(text: str) -> str:
    start = text.index(BEGIN)
    return text[start : text.index(END, start) + len(END)]


def _retyped(tree: ast.AST) -> list[str]:
    """String/bytes constants (f-string parts too) that spell a protocol name."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str | bytes):
            continue
        text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
        bare = text.strip('"')
        if bare.startswith(CHANNEL_PREFIXES) or bare in RECORD_NAMES:
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_the_agent_embeds_the_protocol_block_verbatim() -> None:
    home = _block(HOME.read_text(encoding="utf-8"))
    agent = AGENT.read_text(encoding="utf-8")
    assert home in agent, (
        "mvp_tui/node_agent.py's node protocol block differs from mvp_tui/node_protocol.py's; "
        "copy the block between the markers from node_protocol.py into node_agent.py"
    )
    assert agent.count(BEGIN) == 1


def test_the_agent_speaks_the_names_of_its_embedded_block() -> None:
    """The agent module (as the app imports it) exposes the same values as the home."""
    from mvp_tui import node_agent

    for name in ("WEIGHTS_CHANNEL", "WORKER_FATAL", "WEIGHTS_LOADED", "NODE_AGENT_PHASE"):
        assert getattr(node_agent, name) == getattr(node_protocol, name)
    assert node_agent.agent_channel(3) == node_protocol.agent_channel(3) == "mvp.node.3.agent"
    assert node_agent.engine_channel(3) == "mvp.node.3.engine"


def test_no_module_retypes_a_protocol_name() -> None:
    offenders = {}
    for top in SHIPPED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == HOME:
                continue
            text = path.read_text(encoding="utf-8")
            if path == AGENT:
                text = text.replace(_block(text), "")
            found = _retyped(ast.parse(text))
            if found:
                offenders[str(path.relative_to(ROOT))] = found
    assert not offenders, (
        "these modules type node protocol names; import them from mvp_tui/node_protocol.py: "
        f"{offenders}"
    )


def test_the_scan_finds_a_retyped_name() -> None:
    """The check above is not vacuous: it sees each spelling a module might use."""
    source = (
        'A = "mvp.worker.weights"\nB = b\'"WorkerFatal"\'\nC = f"mvp.node.{n}.agent"\n'
        'D = "WeightsLoaded"\nE = "mvp.orch.prompt"\n'
    )
    assert len(_retyped(ast.parse(source))) == 4


def test_parse_record_takes_only_objects() -> None:
    assert node_protocol.parse_record(b'{"type": "WorkerFatal"}') == {"type": "WorkerFatal"}
    assert node_protocol.parse_record(b"[1]") == {}
    assert node_protocol.parse_record(b"\xff") == {}
    assert node_protocol.record_type({"type": 3}) is None
    assert node_protocol.int_field({"port": True}, "port") is None
    assert node_protocol.int_field({"port": 8080}, "port") == 8080

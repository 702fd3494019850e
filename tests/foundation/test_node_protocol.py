"""The node protocol has one home (mvp_tui/node_protocol.py), which the agent imports (it ships
in the agent's zipapp): no other shipped module types a node channel's or a record's name."""

from __future__ import annotations

import ast
from pathlib import Path

from mvp_tui import node_protocol
from tests.shipped import shipped_files

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "mvp_tui" / "node_protocol.py"

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


def test_no_module_retypes_a_protocol_name() -> None:
    offenders = {}
    for path in shipped_files():
        if path == HOME:
            continue
        text = path.read_text(encoding="utf-8")
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

"""Pieces of the node agent that need no process: parsing, redaction, the frame format,
and the promise that the file runs on an older python3 with the standard library only."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from mvp_tui.agent_bundle import agent_members
from mvp_tui.datastream.frame_line import parse_frame_line
from mvp_tui.node.download import gguf_problem, hub_url, model_cache_path
from mvp_tui.node.frames import Emitter, clean_text
from mvp_tui.node.probe import cpu_model, parse_nvidia_smi, ram_mib
from mvp_tui.node.settings import ConfigError, Settings
from mvp_tui.node_protocol import frame_line
from mvp_tui.secrets import Redactor, secret_values

# docs/providers/index.md "The node image"; tests/agent/test_agent_bundle.py runs it there.
OLDEST_NODE_PYTHON = (3, 8)


def test_frame_lines_are_the_datastream_canonical_form() -> None:
    payload = {"type": "WeightsLoaded", "model_id": "tïny", "port": 8080}
    line = frame_line("mvp.worker.weights", payload)
    parsed = parse_frame_line(line)
    assert parsed.channel == "mvp.worker.weights"
    assert parsed.payload == b'{"type":"WeightsLoaded","model_id":"t\\u00efny","port":8080}'
    assert line.isascii()
    text = parse_frame_line(frame_line("mvp.node.1.engine", "a line"))
    assert text.payload == b"a line"


def test_secrets_are_redacted_from_values_and_lines() -> None:
    env = {"HF_TOKEN": "hf_abcdef123", "VAST_API_KEY": "key-987654", "PATH": "/usr/bin"}
    values = secret_values(env)
    assert values == ["hf_abcdef123", "key-987654"]
    redactor = Redactor(values)
    assert redactor.value({"url": "x?t=hf_abcdef123", "n": [1, "key-987654"]}) == {
        "url": "x?t=<redacted>",
        "n": [1, "<redacted>"],
    }


def test_emitter_writes_whole_frame_lines_without_secrets(tmp_path: Path) -> None:
    out = tmp_path / "out"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT)
    try:
        emitter = Emitter(fd, Redactor(["s3cr3t-value"]), "r-7", 3)
        emitter.engine_line("token s3cr3t-value leaked?")
        emitter.phase("model", "ready", {"path": "/m/s3cr3t-value.gguf"}, elapsed_ms=5)
    finally:
        os.close(fd)
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and "s3cr3t-value" not in out.read_text()
    engine, phase = (parse_frame_line(line) for line in lines)
    assert engine.channel == "mvp.node.3.engine"
    assert engine.payload == b"token <redacted> leaked?"
    assert phase.channel == "mvp.node.3.agent" and b'"elapsed_ms":5' in phase.payload


def test_clean_text_strips_escapes_controls_and_bounds_length() -> None:
    raw = "\x1b[31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07 bell\x07 \x9b0mend"
    assert clean_text(raw) == "red link bell end"
    cut = clean_text("x" * 50, max_chars=10)
    assert cut.startswith("x" * 10) and "[cut 40 chars]" in cut


def test_nvidia_smi_cpuinfo_and_meminfo_parsing() -> None:
    smi = "NVIDIA GeForce RTX 4090, 24564 MiB\nNVIDIA A100-SXM4-80GB, 81920 MiB\n"
    assert parse_nvidia_smi(smi) == [
        {"name": "NVIDIA GeForce RTX 4090", "memory_mib": 24564},
        {"name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920},
    ]
    cpuinfo = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
    assert cpu_model(cpuinfo) == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    assert ram_mib("MemTotal:       24683520 kB\nMemFree: 1 kB\n") == 24105


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({"MVP_ENGINE_PORT": "eighty"}, "MVP_ENGINE_PORT"),
        ({"MVP_ENGINE_PORT": "70000"}, "MVP_ENGINE_PORT"),
        ({"MVP_MAX_CONTEXT": "-1"}, "MVP_MAX_CONTEXT"),
        ({"MVP_ENGINE_READY_TIMEOUT_S": "soon"}, "MVP_ENGINE_READY_TIMEOUT_S"),
        ({"MVP_GGUF_REPO": "a/b"}, "MVP_GGUF_FILE"),
    ],
)
def test_bad_settings_name_their_key(env: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        Settings(env)


def test_hub_url_and_cache_path() -> None:
    settings = Settings(
        {
            "MVP_GGUF_REPO": "org/model-GGUF",
            "MVP_GGUF_FILE": "q4/model Q4.gguf",
            "MVP_HF_ENDPOINT": "http://127.0.0.1:9/",
            "MVP_MODEL_CACHE_DIR": "/c",
        }
    )
    assert hub_url(settings) == (
        "http://127.0.0.1:9/org/model-GGUF/resolve/main/q4/model%20Q4.gguf"
    )
    assert model_cache_path(settings) == Path("/c/org--model-GGUF/main/q4/model Q4.gguf")
    escaping = Settings({"MVP_GGUF_REPO": "a/b", "MVP_GGUF_FILE": "../../etc/x"})
    with pytest.raises(ConfigError, match="MVP_GGUF_FILE"):
        model_cache_path(escaping)


def test_gguf_problem(tmp_path: Path) -> None:
    good = tmp_path / "ok.gguf"
    good.write_bytes(b"GGUF\x03\x00\x00\x00")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"PK\x03\x04")
    assert gguf_problem(good) is None
    assert "GGUF magic" in str(gguf_problem(bad))
    assert gguf_problem(tmp_path / "missing.gguf") == "file does not exist"
    assert "directory" in str(gguf_problem(tmp_path))


@pytest.mark.parametrize("name", [name for name, _ in agent_members()])
def test_every_module_in_the_zip_parses_as_the_oldest_node_python_with_stdlib_only(
    name: str,
) -> None:
    source = dict(agent_members())[name].decode()
    tree = ast.parse(source, feature_version=OLDEST_NODE_PYTHON)
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
        # Runtime features newer than 3.8: dataclass slots/kw_only, zip(strict=), match.
        if isinstance(node, ast.keyword):
            assert node.arg not in ("slots", "kw_only", "strict"), f"{name}:{node.lineno}"
        assert type(node).__name__ != "Match"
    assert imported - {"__future__", "mvp_tui"} <= sys.stdlib_module_names, imported
    if "->" in source:  # annotations such as `str | None` stay unevaluated on 3.8
        assert "from __future__ import annotations" in source, name

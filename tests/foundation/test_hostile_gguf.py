"""Hostile GGUF headers and hub numbers (security read F9): arrays nested thousands deep,
counts and file sizes no model has. `mvp-tui models --repo` and `mvp-tui offers` say
"cannot read this GGUF" in a line, never a traceback (it was a RecursionError and an
OverflowError); the parser itself refuses with NotGguf."""

from __future__ import annotations

import asyncio
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from mvp_tui.cli import main
from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.gguf_shape import MAX_NESTING, NotGguf, parse_shape
from mvp_tui.engine.model_need import ModelNeedError, read_model_need
from mvp_tui.engine.settings import ModelSettings
from tests.fakes.hf_hub_server import FakeHfHub, Shape, gguf_header

REPO = "hostile/Deep-GGUF"
FILE = "Deep-Q4_K_M.gguf"
GIB = 1024**3


def _text(value: str) -> bytes:
    return struct.pack("<Q", len(value)) + value.encode()


def nested_header(depth: int) -> bytes:
    """A header whose first key holds arrays nested `depth` deep (one empty array inside)."""
    value = struct.pack("<IQ", 4, 0)  # the innermost: an array of 0 uint32
    for _ in range(depth - 1):
        value = struct.pack("<IQ", 9, 1) + value  # an array of 1 array
    pair = _text("general.nested") + struct.pack("<I", 9) + value
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + pair


def test_nesting_past_the_cap_is_not_a_gguf_this_reads() -> None:
    with pytest.raises(NotGguf, match="cannot read this GGUF: its metadata nests arrays"):
        parse_shape(nested_header(5000))
    with pytest.raises(NotGguf, match="nests arrays"):
        parse_shape(nested_header(MAX_NESTING + 1))
    # Within the cap the parse goes on to what it needs (here: no architecture).
    with pytest.raises(NotGguf, match=r"names no general\.architecture"):
        parse_shape(nested_header(MAX_NESTING))


def test_a_count_no_model_has_is_refused() -> None:
    pairs = [("general.architecture", 8, _text("llama")),
             ("llama.block_count", 10, struct.pack("<Q", 2**62)),
             ("llama.embedding_length", 4, struct.pack("<I", 4096)),
             ("llama.attention.head_count", 4, struct.pack("<I", 32))]
    body = b"".join(_text(k) + struct.pack("<I", kind) + v for k, kind, v in pairs)
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + body
    with pytest.raises(NotGguf, match="cannot read this GGUF: its header gives a count"):
        parse_shape(header)
    assert parse_shape(gguf_header(Shape())).layers == 32  # a real one still reads


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHfHub]:
    for name in ("HF_TOKEN", "MVP_GGUF_REPO", "MVP_GGUF_FILE", "MVP_GGUF_LOCAL_PATH"):
        monkeypatch.delenv(name, raising=False)
    fake = FakeHfHub()
    fake.add_repo(REPO, {FILE: 4 * GIB}, header=nested_header(5000))
    fake.add_repo("hostile/Huge-GGUF", {"Huge-Q4_K_M.gguf": 10**400})
    with fake:
        monkeypatch.setenv("MVP_HF_ENDPOINT", fake.url)
        monkeypatch.setenv("MVP_CONFIG", str(tmp_path / "config.toml"))
        (tmp_path / "config.toml").write_text("[model]\nmax_context = 4096\n")
        yield fake


def test_models_says_it_cannot_read_a_deeply_nested_header(
    hub: FakeHfHub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "--repo", REPO]) == 0  # the sizes stay; the need is unknown
    out, err = capsys.readouterr()
    assert FILE in out and "Traceback" not in out + err
    assert "needs unknown:" in err and "cannot read this GGUF" in err


def test_models_and_a_hub_size_past_any_model(
    hub: FakeHfHub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "--repo", "hostile/Huge-GGUF", "--json"]) == 0
    (quant,) = json.loads(capsys.readouterr().out)["quants"]
    assert quant["size_bytes"] == 0  # past any model's: unknown, not a float overflow
    assert main(["models", "--repo", "hostile/Huge-GGUF"]) == 0
    out, err = capsys.readouterr()
    assert "Huge-Q4_K_M.gguf" in out and "Traceback" not in out + err


def test_the_need_offers_reads_names_the_gguf_it_cannot_read(
    hub: FakeHfHub, tmp_path: Path
) -> None:
    for repo, file, why in ((REPO, FILE, "nests arrays"),
                            ("hostile/Huge-GGUF", "Huge-Q4_K_M.gguf", "file size")):
        env = {**os.environ, "MVP_GGUF_REPO": repo, "MVP_GGUF_FILE": file}
        config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
        with pytest.raises(ModelNeedError, match=f"cannot read this GGUF.*{why}"):
            asyncio.run(read_model_need(ModelSettings.from_config(config), nodes=1,
                                        environ=env))

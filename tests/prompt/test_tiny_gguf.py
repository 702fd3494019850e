"""The generated test model: deterministic, small, and its output printable and endless."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.tiny_gguf import main, write_tiny_gguf
from tests.prompt.engine import require_engine


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    a = write_tiny_gguf(tmp_path / "a.gguf", seed=3)
    b = write_tiny_gguf(tmp_path / "b.gguf", seed=3)
    c = write_tiny_gguf(tmp_path / "c.gguf", seed=4)
    half = write_tiny_gguf(tmp_path / "h.gguf", seed=3, f16=True)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert 300_000 < half.stat().st_size < a.stat().st_size < 1_000_000


def test_runs_as_a_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main([str(tmp_path / "s.gguf"), "--f16", "--embd", "32", "--heads", "2"])
    assert (tmp_path / "s.gguf").exists() and "bytes" in capsys.readouterr().out


@pytest.mark.peer("llama-cpp-python")
def test_llama_cpp_loads_it_and_samples_only_printable_text(tmp_path: Path) -> None:
    require_engine()
    from llama_cpp import Llama

    model = write_tiny_gguf(tmp_path / "t.gguf")
    llm = Llama(model_path=str(model), n_ctx=256, n_threads=1, verbose=False)
    assert llm.n_vocab() == 458
    assert llm.tokenize(b"hello")[0] == 1  # add_bos: <s> first
    for seed in range(3):
        out = llm.create_completion(
            "x", max_tokens=200, temperature=2.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed
        )
        choice = out["choices"][0]  # type: ignore[index]
        assert choice["finish_reason"] == "length"  # never ends early
        assert out["usage"]["completion_tokens"] == 200  # type: ignore[index]
        assert all(32 <= ord(ch) < 127 for ch in choice["text"])

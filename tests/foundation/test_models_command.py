"""`mvp-tui models` on the fake hub: a search, a repo's quants (a split one as one row) with
what each needs at the run's context, `--json`, `--save QUANT` writing `[model]` with the
file's comments kept, and a gated repo's clear error (exit 1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mvp_tui.cli import main
from tests.fakes.hf_hub_server import FakeHfHub, picker_hub

LLAMA = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"
SPLIT = "unsloth/Llama-3.3-70B-Instruct-GGUF"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHfHub]:
    for name in ("HF_TOKEN", "MVP_GGUF_REPO", "MVP_GGUF_FILE", "MVP_GGUF_LOCAL_PATH",
                 "MVP_MAX_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    with picker_hub() as fake:
        monkeypatch.setenv("MVP_HF_ENDPOINT", fake.url)
        monkeypatch.setenv("MVP_CONFIG", str(tmp_path / "config.toml"))
        (tmp_path / "config.toml").write_text("# mine\n[model]\nmax_context = 8192  # long\n")
        yield fake


def test_search_and_a_repos_quants(hub: FakeHfHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "llama", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["repo"] for h in hits] == [LLAMA, SPLIT, "meta-llama/Llama-3.1-8B-Instruct-GGUF"]

    assert main(["models", "--repo", SPLIT]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["quant", "size", "GB", "needs", "GB", "parts", "file"]
    assert lines[1].split()[:4] == ["Q4_K_M", "39.6", "45", "1"]  # 2.5 GB of KV cache at 8,192
    assert lines[2].split()[:4] == ["Q8_0", "69.0", "76", "2"]
    assert "at 8,192 tokens of context" in err

    assert main(["models", "--repo", LLAMA, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["context"] == 8192
    assert [(q["quant"], q["needs_gb"], q["servable"]) for q in listed["quants"]] == [
        ("Q2_K", 5, True), ("Q4_K_M", 7, True), ("Q5_K_M", 8, True), ("Q8_0", 10, True),
        ("F16", 18, True)]


def test_save_writes_the_model_with_comments_kept(
    hub: FakeHfHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "--repo", LLAMA, "--save", "q8_0"]) == 0
    assert (tmp_path / "config.toml").read_text() == (
        "# mine\n[model]\nmax_context = 8192  # long\n"
        f'gguf_repo = "{LLAMA}"\ngguf_file = "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf"\n')
    assert main(["models", "--repo", SPLIT, "--save", "Q8_0"]) == 2  # split: not servable yet
    assert "split into 2 files" in capsys.readouterr().err
    assert main(["models", "--repo", LLAMA, "--save", "Q3_K_S"]) == 2
    assert "has no such quant; it has: Q2_K, Q4_K_M" in capsys.readouterr().err


def test_a_gated_repo_without_a_token(hub: FakeHfHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--repo", "meta-llama/Llama-3.1-8B-Instruct-GGUF"]) == 1
    err = capsys.readouterr().err
    assert "hub repo meta-llama/Llama-3.1-8B-Instruct-GGUF is gated" in err
    assert "HF_TOKEN is not set" in err and "then set HF_TOKEN" in err
    assert main(["models"]) == 2  # nothing to search or list


def test_save_without_a_config_file_makes_the_users_and_says_what_still_wins(
    hub: FakeHfHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("MVP_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MVP_GGUF_REPO", "someone/Else-GGUF")  # beats the file next time
    assert main(["models", "--repo", LLAMA, "--save", "Q4_K_M"]) == 0
    made = tmp_path / "xdg" / "mvp-tui" / "config.toml"
    assert made.read_text() == (
        f'[model]\ngguf_repo = "{LLAMA}"\ngguf_file = "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"\n')
    err = capsys.readouterr().err
    assert f"saved as [model] gguf_repo and gguf_file in {made}" in err
    assert "(env MVP_GGUF_REPO still wins over the file at the next start)" in err

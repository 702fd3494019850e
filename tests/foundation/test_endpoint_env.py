"""`mvp-tui endpoint --env` (security read F7): the model id it prints is the one the
dashboard configured, never the rented node's echo; one outside a safe set is refused, not
printed for a shell to evaluate; `--shell fish` quotes by fish's rules (a backslash before a
quote ends no string there), checked with real sh and fish."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from mvp_tui.cli import main
from mvp_tui.commands.endpoint import fish_quote
from mvp_tui.engine.run_bringup import NodeLink
from mvp_tui.lease.endpoint_record import (
    EndpointRecord,
    endpoint_path,
    load_endpoint,
    save_endpoint,
)
from mvp_tui.lease.records import RecordStore
from tests.peers import missing_peer

RUN = "r-1a2b3c4d"
KEY = "mvp-key-for-the-env-tests-0123456789"
SAFE = "bartowski/Llama-3.1-8B:Q4_K_M@main+x_1.0"
HOSTILE = ["m\\'; touch X; #", "$(touch X)", "a b", "x\ny", "", "m\x1b]52;c;aGk=\x07", "é"]


def _record(state: Path, model: str) -> None:
    store = RecordStore(state)
    endpoint_path(store, RUN).parent.mkdir(parents=True, exist_ok=True)
    save_endpoint(store, RUN, EndpointRecord(api_key=KEY, base_url="http://127.0.0.1:8642",
                                             model=model, serving=True))


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MVP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    return tmp_path / "state"


@pytest.mark.parametrize("model", HOSTILE)
def test_a_model_id_outside_the_safe_set_is_refused(
    state: Path, model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _record(state, model)
    for shell in ("sh", "fish"):
        assert main(["endpoint", RUN, "--env", "--shell", shell]) == 2
        out, err = capsys.readouterr()
        assert out == "" and KEY not in err
        assert "holds characters outside letters, digits and ._:/@+-" in err
        assert f"run {RUN}'s endpoint record" in err and "[model] id" in err
        assert "\x1b" not in err and "\x07" not in err


def _evaluated(shell: str, lines: str, tmp_path: Path) -> list[str]:
    script = tmp_path / f"env.{shell}"
    script.write_text(lines)
    show = 'printf "%s\\n" "$OPENAI_BASE_URL" "$OPENAI_API_KEY" "$OPENAI_MODEL"'
    if shell == "fish":
        fish = shutil.which("fish") or missing_peer(
            "fish", "not on PATH", "apt-get install fish (scripts/peers.sh does)")
        argv = [fish, "--no-config", "-c", f"eval (cat {script}); {show}"]
    else:
        argv = ["/bin/sh", "-c", f'eval "$(cat {script})"; {show}']
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("shell", ["sh", "fish"])
def test_each_shell_reads_back_the_values_it_was_given(
    state: Path, tmp_path: Path, shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _record(state, SAFE)
    assert main(["endpoint", RUN, "--env", "--shell", shell]) == 0
    lines = capsys.readouterr().out
    assert _evaluated(shell, lines, tmp_path) == ["http://127.0.0.1:8642/v1", KEY, SAFE]


def test_fish_quoting_holds_what_breaks_out_of_posix_quoting(tmp_path: Path) -> None:
    fish = shutil.which("fish") or missing_peer(
        "fish", "not on PATH", "apt-get install fish (scripts/peers.sh does)")
    for value in [*HOSTILE[:4], "\\", "'", "\\\\'", "a\\"]:
        done = subprocess.run([fish, "--no-config", "-c", f"printf %s {fish_quote(value)}"],
                              capture_output=True, text=True, cwd=tmp_path, timeout=30)
        assert (done.returncode, done.stdout) == (0, value), value
    assert not (tmp_path / "X").exists()


def test_shell_is_for_env_only(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _record(state, SAFE)
    assert main(["endpoint", RUN, "--shell", "fish"]) == 2
    assert "use it with --env" in capsys.readouterr().err


def test_the_record_holds_the_configured_model_not_the_nodes_echo(tmp_path: Path) -> None:
    """A hostile node reports its own model id when it serves; the record (what `endpoint`
    prints) keeps the id this dashboard configured and sent it."""
    store = RecordStore(tmp_path)
    endpoint_path(store, RUN).parent.mkdir(parents=True)
    loaded = SimpleNamespace(model_id="m\\'; touch X; #", auth="key", idle_stop_mins=None,
                             slots=0)
    ctx = SimpleNamespace(api_key=KEY, rpc_token="", store=store, run_id=RUN,
                          watchdog=SimpleNamespace(idle_stop_mins=None),
                          settings=SimpleNamespace(model=SimpleNamespace(model_id=SAFE)),
                          log=print)
    link = SimpleNamespace(ctx=ctx, endpoint=None, local_url="http://127.0.0.1:8642",
                           verdicts=SimpleNamespace(watch=SimpleNamespace(loaded=loaded)))
    NodeLink.keep_endpoint(link, serving=True)  # type: ignore[arg-type]
    record = load_endpoint(store, RUN)
    assert record is not None and record.model == SAFE

"""`mvp-tui check` as a user runs it (a fresh process), against the fake Vast.ai and RunPod
servers over real HTTP on loopback: every check passes with good keys and spends nothing; a
refused key, a missing key, a state dir that is a file and a key file others can read each
read as they should; `--json`'s shape; the keys never appear in what it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from mvp_tui.rehearsal.vast_replies import Fault
from tests.fakes.runpod_server import FakeRunPod
from tests.fakes.vastai_server import FakeVast

VAST_KEY = "fake-vast-key-check-0123456789"
RUNPOD_KEY = "rpa_fake_check_key_0123456789abcdef"
NAMES = ["config", "vastai key", "runpod key", "ssh identity", "local engine", "state dir",
         "clock"]


@pytest.fixture
def vast() -> Iterator[FakeVast]:
    with FakeVast(api_key=VAST_KEY) as server:
        yield server


@pytest.fixture
def runpod() -> Iterator[FakeRunPod]:
    with FakeRunPod(api_key=RUNPOD_KEY) as server:
        yield server


@pytest.fixture
def identity(tmp_path: Path) -> Path:
    path = tmp_path / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(path))
    path.chmod(0o600)
    return path


@pytest.fixture
def env(vast: FakeVast, runpod: FakeRunPod, identity: Path, tmp_path: Path) -> dict[str, str]:
    """Both providers keyed, Vast.ai selected (so a machine without llama.cpp still passes:
    the engine then runs on the node)."""
    return {
        "MVP_NODE_PROVIDER": "vastai",
        "VASTAI_API_KEY": VAST_KEY,
        "VAST_URL": vast.url,
        "RUNPOD_API_KEY": RUNPOD_KEY,
        "MVP_RUNPOD_API_URL": runpod.api_url,
        "MVP_VASTAI_SSH_IDENTITY": str(identity),
        "MVP_RUNPOD_SSH_IDENTITY": str(identity),
        "MVP_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "no-config"),  # no user config file is read
    }


def check(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("MVP_", "VAST", "RUNPOD", "PYTHONWARNINGS"))}
    return subprocess.run([sys.executable, "-m", "mvp_tui", "check", *args],
                          capture_output=True, text=True, env={**base, **env}, timeout=120)


def checks(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    report = json.loads(done.stdout)
    return {c["name"]: c for c in report["checks"]}


def line(done: subprocess.CompletedProcess[str], name: str) -> str:
    """The text line of check `name`, with the indented lines under it."""
    lines = done.stdout.splitlines()
    start = next(i for i, text in enumerate(lines) if text[2:].startswith(name + " "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")),
               len(lines))
    return "\n".join(lines[start:end])


def no_secret(done: subprocess.CompletedProcess[str], *secrets: str) -> None:
    for secret in secrets:
        assert secret not in done.stdout and secret not in done.stderr


def test_every_check_passes_with_good_keys_and_spends_nothing(
    env: dict[str, str], vast: FakeVast, runpod: FakeRunPod
) -> None:
    done = check(env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("config", "vastai key", "runpod key", "ssh identity", "state dir", "clock"):
        assert line(done, name).startswith("✓ "), done.stdout
    assert "✗" not in done.stdout
    assert "account" in line(done, "vastai key") and "0 pod(s)" in line(done, "runpod key")
    assert "of Vast.ai's clock" in line(done, "clock")
    assert {r.method for r in vast.requests} == {"GET"}
    assert {r.method for r in runpod.requests} == {"GET"}
    assert vast.instances() == [] and runpod.pods() == []
    no_secret(done, VAST_KEY, RUNPOD_KEY)


def test_a_refused_key_fails_with_the_fix_naming_its_env_var(env: dict[str, str]) -> None:
    wrong = "wrong-vast-key-9876543210"
    done = check(env={**env, "VASTAI_API_KEY": wrong})
    assert done.returncode == 1
    text = line(done, "vastai key")
    assert text.startswith("✗ ") and "refused the API key" in text, text
    assert "fix: the key from env VASTAI_API_KEY was refused" in text, text
    assert line(done, "runpod key").startswith("✓ ")
    no_secret(done, wrong, VAST_KEY, RUNPOD_KEY)


def test_a_provider_with_no_key_does_not_apply(env: dict[str, str]) -> None:
    keyless = {k: v for k, v in env.items() if not k.startswith(("RUNPOD", "MVP_RUNPOD"))}
    done = check(env=keyless)
    assert done.returncode == 0, done.stdout
    text = line(done, "runpod key")
    assert text.startswith("– ") and "RUNPOD_API_KEY" in text, text


def test_the_selected_provider_without_a_key_fails(env: dict[str, str]) -> None:
    done = check(env={**env, "MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": ""})
    assert done.returncode == 1
    text = line(done, "runpod key")
    assert text.startswith("✗ ") and "RUNPOD_API_KEY" in text, text


def test_a_state_dir_that_is_a_file_fails(env: dict[str, str], tmp_path: Path) -> None:
    state = tmp_path / "state-file"
    state.write_text("not a directory")
    done = check(env={**env, "MVP_STATE_DIR": str(state)})
    assert done.returncode == 1
    text = line(done, "state dir")
    assert text.startswith("✗ ") and str(state) in text and "MVP_STATE_DIR" in text, text


def test_an_identity_others_can_read_fails(env: dict[str, str], identity: Path) -> None:
    identity.chmod(0o644)
    done = check(env=env)
    assert done.returncode == 1
    text = line(done, "ssh identity")
    assert text.startswith("✗ ") and f"chmod 600 {identity}" in text, text


def test_a_missing_identity_fails_with_ssh_keygen(env: dict[str, str], tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    done = check(env={**env, "MVP_VASTAI_SSH_IDENTITY": str(missing)})
    assert done.returncode == 1
    text = line(done, "ssh identity")
    assert text.startswith("✗ ") and "ssh-keygen" in text, text


def test_an_unreachable_api_names_its_host(env: dict[str, str]) -> None:
    done = check(env={**env, "VAST_URL": "http://127.0.0.1:9"})
    assert done.returncode == 1
    text = line(done, "vastai key")
    assert text.startswith("✗ ") and "127.0.0.1:9" in text and "ConnectError" in text, text


def test_json_has_every_check_with_its_status_detail_and_fix(env: dict[str, str]) -> None:
    keyless = {k: v for k, v in env.items() if not k.startswith(("RUNPOD", "MVP_RUNPOD"))}
    done = check("--json", env=keyless)
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert [c["name"] for c in report["checks"]] == NAMES
    for entry in report["checks"]:
        assert set(entry) == {"name", "status", "detail", "fix", "warnings"}
        assert entry["status"] in ("ok", "failed", "skipped") and entry["detail"]
    by_name = checks(done)
    assert by_name["vastai key"]["status"] == "ok"
    assert by_name["runpod key"]["status"] == "skipped"
    assert "RUNPOD_API_KEY" in by_name["runpod key"]["fix"]
    assert by_name["local engine"]["status"] in ("ok", "skipped")


def test_provider_text_echoing_the_key_is_redacted_and_cleaned(
    env: dict[str, str], vast: FakeVast, runpod: FakeRunPod
) -> None:
    echo = f"\x1b]0;pwned\x07key {VAST_KEY} is\x1b[31m not valid"
    vast.script("user", Fault(status=403, body={"success": False, "error": "auth_error",
                                                "msg": echo}))
    for args in ((), ("--json",)):
        if args:
            vast.script("user", Fault(status=403, body={"error": "auth_error", "msg": echo}))
        done = check(*args, env=env)
        assert done.returncode == 1
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout
        no_secret(done, VAST_KEY, RUNPOD_KEY)
    assert checks(done)["vastai key"]["status"] == "failed"


def test_a_refused_runpod_key_names_its_env_var(env: dict[str, str]) -> None:
    wrong = "rpa_wrong_key_0123456789"
    done = check(env={**env, "RUNPOD_API_KEY": wrong})
    assert done.returncode == 1
    text = line(done, "runpod key")
    assert text.startswith("✗ ") and "HTTP 401" in text, text
    assert "fix: the key from env RUNPOD_API_KEY was refused" in text, text
    no_secret(done, wrong, VAST_KEY)


def test_the_config_line_names_the_file_and_each_layers_count(
    env: dict[str, str], tmp_path: Path
) -> None:
    file = tmp_path / "config.toml"
    file.write_text("[limits]\nmax_price_per_hour = 1.5\nmax_spend_usd = 2.0\n")
    done = check(env={**env, "MVP_CONFIG": str(file)})
    assert done.returncode == 0, done.stdout
    text = line(done, "config")
    assert text.startswith("✓ ") and f"file {file}" in text and "2 from file" in text, text
    assert "from env" in text and "provider vastai (from env MVP_NODE_PROVIDER)" in text, text


def test_inert_seed_keys_and_cautions_are_warnings_on_the_config_line(
    env: dict[str, str]
) -> None:
    flagged = {k: v for k, v in env.items() if k != "VASTAI_API_KEY"}
    done = check("--vastai-api-key", VAST_KEY, env={**flagged, "MVP_DASHBOARD": "true"})
    assert done.returncode == 0, done.stdout  # warnings fail nothing
    text = line(done, "config")
    assert "warning: --vastai-api-key puts the API key in this process's argv" in text, text
    assert "warning: [prompt] dashboard = true from env MVP_DASHBOARD" in text, text
    assert line(done, "vastai key").startswith("✓ ")
    no_secret(done, VAST_KEY, RUNPOD_KEY)
    report = checks(check("--json", "--vastai-api-key", VAST_KEY, env=flagged))
    assert any("argv" in w for w in report["config"]["warnings"])

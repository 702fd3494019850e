"""API keys out of argv: a key given as a flag warns (once, never echoing it), the file
forms (`--vastai-api-key-file`, `--runpod-api-key-file`, env `…_FILE`) give it without one,
and a key file or a config file holding a key that others can read gets a warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mvp_tui.config import ConfigError
from tests.foundation.test_config import load

KEY = "k-trust-0123456789abcdef"


def _cli(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST", "RUNPOD"))}
    env = {**base, "XDG_CONFIG_HOME": str(tmp / "xdg"), "MVP_STATE_DIR": str(tmp / "state"),
           **env}
    return subprocess.run([sys.executable, "-m", "mvp_tui", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize(
    ("provider", "flag"), [("vastai", "--vastai-api-key"), ("runpod", "--runpod-api-key")]
)
def test_a_key_given_as_a_flag_warns_once_and_is_never_echoed(
    tmp_path: Path, provider: str, flag: str
) -> None:
    done = _cli(tmp_path, "config", "--provider", provider, flag, KEY)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if flag in line]
    assert len(warnings) == 1 and warnings[0].startswith("mvp-tui: warning: ")
    assert "visible in ps" in warnings[0] and f"{flag}-file" in warnings[0]
    assert KEY not in done.stdout and KEY not in done.stderr
    assert KEY[:8] not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("provider", "form"),
    [
        ("vastai", ("flag", "--vastai-api-key-file")),
        ("vastai", ("env", "VASTAI_API_KEY_FILE")),
        ("runpod", ("flag", "--runpod-api-key-file")),
        ("runpod", ("env", "RUNPOD_API_KEY_FILE")),
    ],
)
def test_a_key_file_gives_the_key_without_a_warning_or_an_echo(
    tmp_path: Path, provider: str, form: tuple[str, str]
) -> None:
    key_file = tmp_path / "api.key"
    key_file.write_text(f"{KEY}\n")
    key_file.chmod(0o600)
    kind, name = form
    flags = {"--provider": provider} | ({name: str(key_file)} if kind == "flag" else {})
    env = {name: str(key_file)} if kind == "env" else {}
    config = load(tmp_path, env=env, flags=flags)
    assert config[f"{provider}.api_key"] == KEY
    assert str(key_file) in str(config.sources[f"{provider}.api_key"])
    assert config.cautions == ()
    args = ["config", "--provider", provider]
    args += [name, str(key_file)] if kind == "flag" else []
    done = _cli(tmp_path, *args, **env)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert KEY not in done.stdout + done.stderr


def test_the_key_itself_wins_when_set_in_a_later_layer(tmp_path: Path) -> None:
    key_file = tmp_path / "api.key"
    key_file.write_text("from-the-file-0123456789\n")
    key_file.chmod(0o600)
    config = load(
        tmp_path, env={"VASTAI_API_KEY_FILE": str(key_file)},
        flags={"--provider": "vastai", "--vastai-api-key": KEY},
    )
    assert config["vastai.api_key"] == KEY
    assert len(config.cautions) == 1  # the flag's warning


@pytest.mark.parametrize("body", ["", "\n", "secretpart-one\nsecretpart-two\n"])
def test_a_key_file_that_is_not_one_key_is_an_error_that_shows_no_content(
    tmp_path: Path, body: str
) -> None:
    key_file = tmp_path / "api.key"
    key_file.write_text(body)
    with pytest.raises(ConfigError, match="must hold the key alone") as refused:
        load(tmp_path, flags={"--provider": "vastai", "--vastai-api-key-file": str(key_file)})
    assert "secretpart" not in str(refused.value)


def test_a_missing_key_file_names_the_key_and_the_path(tmp_path: Path) -> None:
    absent = tmp_path / "absent.key"
    with pytest.raises(ConfigError, match=r"\[vastai\] api_key_file = .*absent\.key.*cannot read"):
        load(tmp_path, flags={"--provider": "vastai", "--vastai-api-key-file": str(absent)})


def test_a_key_file_others_can_read_gets_a_warning(tmp_path: Path) -> None:
    key_file = tmp_path / "api.key"
    key_file.write_text(KEY)
    key_file.chmod(0o644)
    config = load(tmp_path, flags={"--provider": "runpod", "--runpod-api-key-file": str(key_file)})
    (caution,) = config.cautions
    assert "readable by others (mode 644)" in caution and f"chmod 600 {key_file}" in caution
    assert KEY not in caution


def test_a_config_file_holding_a_key_and_readable_by_others_gets_a_warning(
    tmp_path: Path,
) -> None:
    toml = f'[provider]\nkind = "vastai"\n[vastai]\napi_key = "{KEY}"\n'
    path = tmp_path / "config.toml"
    path.write_text("")
    path.chmod(0o640)  # load() writes into the file it finds: the mode stays
    config = load(tmp_path, toml=toml)
    (caution,) = config.cautions
    assert f"the config file {path} holds an API key" in caution and "mode 640" in caution
    assert KEY not in caution
    path.chmod(0o600)
    assert load(tmp_path, toml=toml).cautions == ()
    # A config file without a key may be readable by anyone.
    plain = load(tmp_path, toml='[provider]\nkind = "vastai"\n')
    assert plain.cautions == ()


def test_the_config_file_warning_reaches_the_user(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[provider]\nkind = "vastai"\n[vastai]\napi_key = "{KEY}"\n')
    path.chmod(0o644)
    done = _cli(tmp_path, "config", "--config", str(path))
    assert done.returncode == 0, done.stderr
    assert f"mvp-tui: warning: the config file {path} holds an API key" in done.stderr
    assert KEY not in done.stdout + done.stderr

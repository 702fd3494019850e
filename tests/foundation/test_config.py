"""Layered configuration: defaults → TOML → env → flags, with errors that name their source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomlkit

from mvp_tui.config import ConfigError, ConfigPaths, load_config
from mvp_tui.config.loader import flag_dest
from mvp_tui.config.report import render
from mvp_tui.config.schema import KEYS
from mvp_tui.config.toml_file import write_key

REPO = Path(__file__).resolve().parents[2]


def load(
    tmp_path: Path,
    toml: str | None = None,
    env: dict[str, str] | None = None,
    flags: dict[str, str] | None = None,
):
    path = None
    if toml is not None:
        path = tmp_path / "config.toml"
        path.write_text(toml)
    by_flag = {spec.flag: spec for spec in KEYS if spec.flag}
    parsed = {flag_dest(by_flag[f]): (v, f) for f, v in (flags or {}).items()}
    return load_config(
        flags=parsed,
        env=env or {},
        paths=ConfigPaths(explicit=path, explicit_source="flag --config")
        if path
        else ConfigPaths(default=tmp_path / "absent.toml"),
    )


LAYERING_TOML = """
[runtime]
profile = "deploy"
run_id = "r-41"
node_id = 9
stage_index = 3
layer_end_exclusive = 24

[provider]
kind = "vastai"

[image]
node = "docker.io/example/from-image-node:toml"

[vastai]
image = "docker.io/example/from-vastai-image:toml"
api_key = "toml-key-123456"
bootstrap_command = "/toml/bootstrap"
disk_gb = 60
gpu_name = "RTX 4090"

[prompt]
rpc_addr = "127.0.0.1:19999"
max_tokens = 17

[model]
id = "toml-model"
gguf_repo = "toml/repo"
gguf_file = "toml.gguf"
gguf_revision = "toml-rev"
max_context = 384
"""


def test_layers_defaults_toml_env_then_cli(tmp_path: Path) -> None:
    # The seed's config_layers_defaults_toml_env_then_cli, in this app's keys.
    config = load(
        tmp_path,
        LAYERING_TOML,
        env={
            "MVP_NODE_PROVIDER": "docker",
            "MVP_NODE_IMAGE": "docker.io/example/from-env:latest",
            "MVP_PROMPT_MAX_TOKENS": "23",
            "MVP_MODEL_ID": "env-model",
        },
        flags={
            "--image": "docker.io/example/from-cli:latest",
            "--max-tokens": "31",
            "--model-id": "cli-model",
            "--max-context": "768",
        },
    )
    assert config.provider == "docker"
    assert config["image.node"] == "docker.io/example/from-cli:latest"
    assert config["prompt.max_tokens"] == 31
    assert config["model.id"] == "cli-model"
    assert config["runtime.run_id"] == "r-41"
    assert config["runtime.node_id"] == 9
    assert config["runtime.stage_index"] == 3
    assert config["runtime.layer_end_exclusive"] == 24
    assert config["model.max_context"] == 768
    assert config["model.gguf_revision"] == "toml-rev"
    # vastai keys are not parsed for the docker provider, only reported as unused.
    assert "vastai.disk_gb" not in config.values
    assert "vastai.disk_gb" in config.unused
    assert str(config.sources["prompt.max_tokens"]) == "flag --max-tokens"
    assert str(config.sources["model.gguf_repo"]).startswith(f"file {tmp_path / 'config.toml'}:")


def test_each_value_knows_its_source(tmp_path: Path) -> None:
    config = load(tmp_path, '[model]\nid = "from-file"\n', env={"MVP_PROMPT_MAX_TOKENS": "5"})
    assert str(config.sources["model.id"]) == f"file {tmp_path / 'config.toml'}:2"
    assert str(config.sources["prompt.max_tokens"]) == "env MVP_PROMPT_MAX_TOKENS"
    assert str(config.sources["image.node"]) == "built-in default"


@pytest.mark.parametrize(
    ("env", "provider"),
    [
        ({"MVP_RUNTIME_CONFIG": "local"}, "local"),
        ({"MVP_RUNTIME_CONFIG": "deploy"}, "vastai"),
        ({"MVP_RUNTIME_CONFIG": "deploy", "MVP_NODE_PROVIDER": "docker"}, "docker"),
        ({}, "local"),
    ],
)
def test_profile_selects_provider_and_explicit_provider_wins(
    tmp_path: Path, env: dict[str, str], provider: str
) -> None:
    assert load(tmp_path, env=env).provider == provider


def test_local_run_ignores_malformed_vastai_environment(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        env={
            "MVP_VASTAI_CONFIRM_LEASE": "definitely-not-a-bool",
            "MVP_VASTAI_DISK_GB": "not-a-u32",
            "MVP_VASTAI_MIN_DOWN_MBPS": "not-a-float",
        },
    )
    assert config.provider == "local"
    assert not any(key.startswith("vastai.") for key in config.values)


def test_vastai_values_are_validated_when_vastai_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, env={"MVP_RUNTIME_CONFIG": "deploy", "MVP_VASTAI_DISK_GB": "not-a-u32"})
    message = str(err.value)
    assert "[vastai] disk_gb" in message
    assert "'not-a-u32'" in message
    assert "env MVP_VASTAI_DISK_GB" in message
    assert "whole number" in message


def test_cached_model_with_deploy_is_rejected_before_vastai_env_is_parsed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load(
            tmp_path,
            env={
                "MVP_RUNTIME_CONFIG": "deploy",
                "MVP_CACHED_MODEL_HOST_PATH": "/m.gguf",
                "MVP_VASTAI_CONFIRM_LEASE": "definitely-not-a-bool",
            },
        )
    assert "requires provider=docker" in str(err.value)
    assert "MVP_VASTAI_CONFIRM_LEASE" not in str(err.value)


def test_toml_error_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, '[prompt]\n# comment\nmax_tokens = "many"\n')
    assert f"{tmp_path / 'config.toml'}:3" in str(err.value)
    assert "[prompt] max_tokens" in str(err.value)


def test_flag_error_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"flag --node-id .*whole number ≥ 1"):
        load(tmp_path, flags={"--node-id": "0"})


def test_unknown_key_has_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, "[vastai]\ndsk_gb = 60\n")
    assert "unknown key [vastai] dsk_gb" in str(err.value)
    assert "did you mean disk_gb?" in str(err.value)
    assert ":2" in str(err.value)


def test_unknown_section_has_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown section \[promt\].*did you mean prompt\?"):
        load(tmp_path, "[promt]\nmax_tokens = 3\n")


def test_invalid_toml_syntax_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config.toml:1:.*not valid TOML"):
        load(tmp_path, "[prompt\n")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("yes", True),
        ("ON", True),
        ("true", True),
        ("0", False),
        ("no", False),
        ("off", False),
        ("False", False),
    ],
)
def test_booleans_accept_the_seed_forms(tmp_path: Path, raw: str, expected: bool) -> None:
    config = load(
        tmp_path, env={"MVP_RUNTIME_CONFIG": "deploy", "MVP_VASTAI_REQUIRE_VERIFIED": raw}
    )
    assert config["vastai.require_verified"] is expected


def test_bad_boolean_lists_the_accepted_forms(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="1/0, true/false, yes/no, or on/off"):
        load(tmp_path, env={"MVP_RUNTIME_CONFIG": "deploy", "MVP_VASTAI_REQUIRE_VERIFIED": "maybe"})


def test_missing_explicit_file_is_an_error_missing_default_is_fine(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(
            paths=ConfigPaths(explicit=tmp_path / "nope.toml", explicit_source="flag --config")
        )
    assert load(tmp_path).file is None


def test_config_path_from_env(tmp_path: Path) -> None:
    paths = ConfigPaths.resolve(None, {"MVP_CONFIG": str(tmp_path / "x.toml")})
    assert paths.explicit == tmp_path / "x.toml"
    assert ConfigPaths.resolve("~/y.toml", {}).explicit == Path.home() / "y.toml"


def test_rpc_addr_must_be_loopback(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="loopback"):
        load(tmp_path, env={"MVP_PROMPT_RPC_BIND": "0.0.0.0:19777"})


def test_api_keys_from_vendor_env_names(tmp_path: Path) -> None:
    config = load(tmp_path, env={"MVP_RUNTIME_CONFIG": "deploy", "VAST_API_KEY": "vendor-key-123"})
    assert config["vastai.api_key"] == "vendor-key-123"
    config = load(tmp_path, env={"MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": "rp-key-123456"})
    assert config["runpod.api_key"] == "rp-key-123456"


def test_report_redacts_secrets_and_shows_sources(tmp_path: Path) -> None:
    config = load(tmp_path, LAYERING_TOML, env={"VASTAI_API_KEY": "env-secret-value-999"})
    text = render(config)
    assert "env-secret-value-999" not in text and "toml-key-123456" not in text
    assert re.search(r"api_key = <redacted>\s+# env VASTAI_API_KEY", text)
    assert re.search(r"disk_gb = 60\s+# file .*config.toml:\d+", text)


def test_ui_keys_table_is_checked_against_binding_ids(tmp_path: Path) -> None:
    config = load(tmp_path, '[ui.keys]\nsearch-offers = "f5"\n')
    assert config.ui_keys == {"search-offers": "f5"}
    with pytest.raises(ConfigError, match=r"unknown binding id .*did you mean search-offers"):
        load(tmp_path, '[ui.keys]\nsearch-ofers = "f5"\n')


def test_write_back_keeps_comments(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '# my settings\n[ui]\n# I like dark\ntheme = "mvp-dark"  # trailing\n'
        "\n[prompt]\nmax_tokens = 9\n"
    )
    write_key(path, "ui", "theme", "mvp-light")
    text = path.read_text()
    assert "# my settings" in text and "# I like dark" in text and "# trailing" in text
    assert tomlkit.parse(text)["ui"]["theme"] == "mvp-light"  # type: ignore[index]
    assert "max_tokens = 9" in text


def _uncommented_example() -> str:
    text = (REPO / "config.example.toml").read_text()
    return re.sub(r"^# (\w[\w-]* = .*)$", r"\1", text, flags=re.M)


def test_example_documents_every_key_with_env_and_flag() -> None:
    text = (REPO / "config.example.toml").read_text()
    for spec in KEYS:
        block = text.split(f"[{spec.section}]\n", 1)[1].split("\n[", 1)[0]
        assert re.search(rf"^# {spec.name} = ", block, re.M), f"{spec.dotted} missing"
        for env in spec.env:
            assert env in block, f"{env} undocumented for {spec.dotted}"
        if spec.flag:
            assert spec.flag in block, f"{spec.flag} undocumented"


def test_example_parses_and_loads_when_uncommented(tmp_path: Path) -> None:
    body = _uncommented_example()
    for provider in ("vastai", "runpod", "docker"):
        text = re.sub(r'^kind = ".*"$', f'kind = "{provider}"', body, flags=re.M)
        if provider != "docker":
            text = re.sub(r"^cached_model_host_path = .*$", "", text, flags=re.M)
        config = load(tmp_path, text)
        assert config.provider == provider


def test_the_report_quotes_config_text_without_its_escapes(tmp_path: Path) -> None:
    """The comments of `mvp-tui config` quote the model's repo, file and revision and the
    state dir's path as they came: an escape in any of them never reaches the terminal."""
    osc = "\x1b]2;PWNED\x07"
    config = load(tmp_path, env={"MVP_GGUF_REPO": f"owner/repo{osc}",
                                 "MVP_GGUF_FILE": f"m{osc}.gguf",
                                 "MVP_GGUF_REVISION": f"rev{osc}",
                                 "MVP_STATE_DIR": str(tmp_path / "state")})
    text = render(config)
    assert "\x1b" not in text and "\x07" not in text
    assert "# model served: hub repo owner/repo, file m.gguf at revision rev" in text
    assert f"(kept in {tmp_path}/state/owner_tag)" in text


@pytest.mark.parametrize("layer", ["file", "env"])
def test_a_path_with_a_control_character_is_refused_by_key_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layer: str
) -> None:
    """`[state] dir = "\x1b]2;…"` once became a folder named by the escape in whatever
    directory `mvp-tui config` ran in (the config fuzz left one in the checkout): a path
    key with a control character is an error naming the key and its source, escaped."""
    monkeypatch.chdir(tmp_path)
    osc = "\x1b]2;PWNED\x07"
    toml = '[state]\ndir = "\\u001b]2;PWNED\\u0007"\n' if layer == "file" else None
    env = {} if layer == "file" else {"MVP_STATE_DIR": f"state{osc}"}
    with pytest.raises(ConfigError) as err:
        load(tmp_path, toml, env=env)
    message = str(err.value)
    assert "[state] dir" in message and "control character" in message
    assert "\x1b" not in message and "\x07" not in message
    assert list(tmp_path.iterdir()) == ([tmp_path / "config.toml"] if layer == "file" else [])

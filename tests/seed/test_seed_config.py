"""The seed's config files load here: its keys are accepted (the ones not built say so in one
warning line each, never an error), its numeric run ids work, its image precedence holds and
`[vastai] confirm_lease` does what it says. Contract: shared/seeds/002_…txt, `Config`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mvp_tui.config import ConfigError, ConfigPaths, load_config
from mvp_tui.config.loader import flag_dest
from mvp_tui.config.schema import KEYS
from mvp_tui.engine.orch import run_number
from mvp_tui.engine.settings import RunSettings, node_env
from mvp_tui.labels import attempt_label, parse_label
from tests.seed.seed_files import (
    LAYERING_ENV,
    LAYERING_TOML,
    NO_IROH,
    NO_WEB_DASHBOARD,
    VASTAI_IMAGE_TOML,
    WHOLE_MODEL,
    layering_warnings,
)

BY_FLAG = {spec.flag: spec for spec in KEYS if spec.flag}


def load(path: Path | None, env: dict[str, str] | None = None, flags: dict[str, str] | None = None):
    parsed = {flag_dest(BY_FLAG[f]): (v, f) for f, v in (flags or {}).items()}
    paths = (
        ConfigPaths(explicit=path, explicit_source="flag --config")
        if path
        else ConfigPaths(default=Path("/nonexistent/config.toml"))
    )
    return load_config(flags=parsed, env=env or {}, paths=paths)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o600)  # the seed's files hold an API key: kept private, as the app warns
    return path


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    return subprocess.run(
        [sys.executable, "-m", "mvp_tui", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=60,
    )


def test_the_seeds_layering_file_loads_with_one_warning_per_unbuilt_key(tmp_path: Path) -> None:
    path = write(tmp_path, "layering.toml", LAYERING_TOML)
    flags = {
        "--image": "docker.io/example/from-cli:latest",
        "--max-tokens": "31",
        "--model-id": "cli-model",
        "--max-context": "768",
    }
    config = load(path, LAYERING_ENV, flags)
    # The seed test's own assertions, in this app's keys.
    assert config.provider == "docker"
    assert config.node_image()[0] == "docker.io/example/from-cli:latest"
    assert config["prompt.max_tokens"] == 31
    assert config["model.id"] == "cli-model"
    assert config["runtime.run_id"] == "41"
    assert config["runtime.node_id"] == 9
    assert config["model.max_context"] == 768
    assert config["prompt.dashboard"] is True
    assert config["relay.mode"] == "default"
    assert list(config.warnings) == layering_warnings(str(path))
    RunSettings.from_config(config)  # every typed setting of a run builds


def test_the_seeds_layering_file_through_the_cli_prints_the_warnings(tmp_path: Path) -> None:
    path = write(tmp_path, "layering.toml", LAYERING_TOML)
    result = cli("--config", str(path), "config", env=LAYERING_ENV)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"mvp-tui: warning: {line}" for line in layering_warnings(str(path))
    ]
    assert "unknown" not in result.stderr
    assert "# accepted, no effect here:" in result.stdout


def test_the_seeds_vastai_image_file_loads_without_warnings(tmp_path: Path) -> None:
    path = write(tmp_path, "vastai-image.toml", VASTAI_IMAGE_TOML)
    config = load(path)
    assert config.provider == "vastai"
    assert config.node_image()[0] == "docker.io/example/vastai:toml"
    assert config.warnings == ()
    settings = RunSettings.from_config(config)
    assert settings.walk.image == "docker.io/example/vastai:toml"  # what the create asks for
    assert settings.runtime.bootstrap_command == "/run"


@pytest.mark.parametrize(
    ("env", "flags", "image"),
    [
        ({}, {}, "docker.io/example/vastai:toml"),  # file [vastai] image beats file [image]
        ({"MVP_NODE_IMAGE": "env/img:1"}, {}, "env/img:1"),  # env beats both
        ({}, {"--image": "flag/img:1"}, "flag/img:1"),  # flag beats both
        ({"MVP_VASTAI_IMAGE": "vast-env/img:1"}, {}, "vast-env/img:1"),
        ({"MVP_NODE_IMAGE": "env/img:1"}, {"--vastai-image": "vast-flag/img:1"}, "vast-flag/img:1"),
    ],
)
def test_image_precedence_is_the_seeds(
    tmp_path: Path, env: dict[str, str], flags: dict[str, str], image: str
) -> None:
    config = load(write(tmp_path, "c.toml", VASTAI_IMAGE_TOML), env, flags)
    assert RunSettings.from_config(config).walk.image == image


def test_image_precedence_applies_to_vast_only(tmp_path: Path) -> None:
    config = load(write(tmp_path, "c.toml", VASTAI_IMAGE_TOML), {"MVP_NODE_PROVIDER": "local"})
    assert config.node_image()[0] == "docker.io/example/generic:toml"


@pytest.mark.parametrize("raw", ["run_id = 41", 'run_id = "41"'])
def test_a_toml_integer_run_id_is_accepted(tmp_path: Path, raw: str) -> None:
    config = load(write(tmp_path, "c.toml", f"[runtime]\n{raw}\n"))
    assert config["runtime.run_id"] == "41"


def test_a_numeric_run_id_makes_valid_labels_records_and_node_env(tmp_path: Path) -> None:
    config = load(None, {"MVP_RUN_ID": "41"})
    run_id = str(config["runtime.run_id"])
    label = attempt_label("mvp", "a1b2c3d4e5", run_id, 1, 2)
    assert label == "mvp-a1b2c3d4e5-41-1-2"  # read within this install's tag
    parsed = parse_label(label, "mvp")
    assert parsed is not None and (parsed.run_id, parsed.node_id, parsed.attempt) == ("41", 1, 2)
    assert parse_label("mvp-a1b2c3d4e5-410-1-2", "mvp").run_id != run_id  # type: ignore[union-attr]
    assert run_number(run_id) == 41  # the seed's u64 in records and stream lifetimes
    settings = RunSettings.from_config(config)
    env = node_env(settings.runtime, settings.model, provider="local", run_id=run_id)
    assert env["MVP_RUN_ID"] == "41"


@pytest.mark.parametrize("value", ["my run", "R-1", "-1", "1a", "99999999999999999999999"])
def test_a_run_id_that_cannot_label_an_instance_is_refused_at_load(value: str) -> None:
    with pytest.raises(ConfigError, match=r"\[runtime\] run_id .* from env MVP_RUN_ID"):
        load(None, {"MVP_RUN_ID": value})


def test_unbuilt_keys_from_env_and_flags_warn_once_each() -> None:
    config = load(
        None,
        {"MVP_DASHBOARD": "1", "MVP_DASHBOARD_PORT": "8123", "MVP_IROH_RELAY_URL": "https://r.x"},
        {"--relay-mode": "disabled", "--tokenizer-local-path": "/tmp/tok.json"},
    )
    assert list(config.warnings) == [
        f"[prompt] dashboard = true from env MVP_DASHBOARD is accepted and has no effect here: "
        f"{NO_WEB_DASHBOARD}",
        "[prompt] dashboard_port = 8123 from env MVP_DASHBOARD_PORT is accepted and has no "
        f"effect here: {NO_WEB_DASHBOARD}",
        f"[relay] mode = 'disabled' from flag --relay-mode is accepted and has no effect here: "
        f"{NO_IROH}",
        f"[relay] url = 'https://r.x' from env MVP_IROH_RELAY_URL is accepted and has no effect "
        f"here: {NO_IROH}",
        "[model] tokenizer_local_path = '/tmp/tok.json' from flag --tokenizer-local-path is "
        "accepted and has no effect here: llama.cpp reads the tokenizer embedded in the GGUF "
        "file; this engine serves the whole model from that one file",
    ]


def test_the_defaults_and_a_whole_model_stage_give_no_warning(tmp_path: Path) -> None:
    text = "[runtime]\nstage_index = 0\nlayer_end_exclusive = 16\n[prompt]\ndashboard = false\n"
    assert load(write(tmp_path, "c.toml", text)).warnings == ()
    assert WHOLE_MODEL  # the reason the stage keys would give


def test_the_seeds_dashboard_flags_are_accepted() -> None:
    from mvp_tui.cli import build_parser, collect_flags

    for argv, value in ((["--dashboard", "config"], True), (["--no-dashboard", "config"], False)):
        flags = collect_flags(build_parser().parse_args(argv))
        config = load_config(
            flags=flags,
            env={"MVP_DASHBOARD": "1"},
            paths=ConfigPaths(default=Path("/nonexistent.toml")),
        )
        assert config["prompt.dashboard"] is value


@pytest.mark.parametrize(
    ("env", "confirm"),
    [
        ({}, True),
        ({"MVP_VASTAI_CONFIRM_LEASE": "false"}, False),
        ({"MVP_VASTAI_CONFIRM_LEASE": "true"}, True),
    ],
)
def test_confirm_lease_is_read(env: dict[str, str], confirm: bool) -> None:
    assert load(None, {"MVP_NODE_PROVIDER": "vastai", **env}).confirm_lease is confirm


def test_text_values_are_trimmed_as_the_seed_trims_env() -> None:
    env = {
        "MVP_NODE_PROVIDER": "vastai",
        "MVP_VASTAI_SSH_USER": " root",
        "MVP_NODE_IMAGE": "img:1 ",
        "MVP_VASTAI_API_KEY": "key-0123\n",  # a key pasted with its newline
        "MVP_MODEL_ID": "  spaced  ",
    }
    config = load(None, env, {"--vastai-bootstrap-command": " nvidia-smi \n"})
    assert config["vastai.ssh_user"] == "root"
    assert config.node_image()[0] == "img:1"
    assert config["vastai.api_key"] == "key-0123"
    assert config["model.id"] == "spaced"
    assert config["vastai.bootstrap_command"] == "nvidia-smi"


def test_an_api_key_with_a_space_inside_is_refused_naming_the_key_never_the_value() -> None:
    with pytest.raises(ConfigError) as refused:
        load(None, {"MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": "key-0123 4567"})
    text = str(refused.value)
    assert "[vastai] api_key" in text and "env VASTAI_API_KEY" in text and "inside" in text
    assert "4567" not in text and "<redacted>" in text

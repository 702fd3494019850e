"""A configured 0, an empty list or empty text means what the key's documentation says:
never silently the default. Typed settings are built once from the config, per area."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mvp_tui.config import Config, ConfigError, ConfigPaths, load_config
from mvp_tui.config.report import render
from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.engine.limits import Limits
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.settings import (
    ModelSettings,
    RunSettings,
    RuntimeSettings,
    selection_policy,
)
from mvp_tui.engine.watchdog import WatchdogSettings
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.providers.base import Offer
from mvp_tui.providers.vastai.offers import build_search_query, policy_violation
from mvp_tui.providers.vastai.section import VastaiSection
from mvp_tui.ssh.settings import SshSettings

VAST = '[provider]\nkind = "vastai"\n\n[vastai]\napi_key = "key-123456"\n\n'


def load(tmp_path: Path, toml: str | None = None, env: dict[str, str] | None = None) -> Config:
    path = None
    if toml is not None:
        path = tmp_path / "config.toml"
        path.write_text(toml)
    return load_config(
        env=env or {},
        paths=ConfigPaths(explicit=path, explicit_source="flag --config")
        if path
        else ConfigPaths(default=tmp_path / "absent.toml"),
    )


def _offer(price: float) -> Offer:
    return Offer(
        provider="vastai",
        offer_id="1",
        gpu_name="RTX 4090",
        num_gpus=1,
        gpu_ram_mib=24000,
        price_per_hour=price,
        reliability=0.99,
        down_mbps=500.0,
        up_mbps=500.0,
        location="XX",
        verified=True,
        cuda_max=12.8,  # a host that can start the default image, with the disk asked
        disk_space_gb=200.0,
    )


# -- [limits] max_price_per_hour = 0: no cap, in the policy and the walk alike ------------------


@pytest.mark.parametrize("how", ["file", "env"])
def test_max_price_zero_is_no_cap_for_the_policy_and_the_walk(tmp_path: Path, how: str) -> None:
    if how == "file":
        config = load(tmp_path, VAST + "[limits]\nmax_price_per_hour = 0\n")
    else:
        config = load(tmp_path, VAST, env={"MVP_MAX_PRICE_PER_HOUR": "0"})
    assert config.settings.limits.max_price_per_hour is None
    policy = selection_policy(config)
    assert policy.max_price_per_hour is None
    assert "dph_total" not in build_search_query(policy)  # Vast is not asked for $0/h offers
    assert policy_violation(_offer(0.4), policy) is None
    assert WalkSettings.from_config(config).max_price_per_hour is None
    assert Limits.from_config(config).max_price_per_hour is None
    # `mvp-tui config` shows what was set, and what it means.
    line = next(x for x in render(config).splitlines() if x.startswith("max_price_per_hour"))
    assert line.startswith("max_price_per_hour = 0 ") and line.endswith("(0 = no limit)")


def test_a_price_cap_is_the_same_for_the_policy_and_the_walk(tmp_path: Path) -> None:
    config = load(tmp_path, VAST + "[limits]\nmax_price_per_hour = 0.5\n")
    policy = selection_policy(config)
    assert policy.max_price_per_hour == 0.5
    assert WalkSettings.from_config(config).max_price_per_hour == 0.5
    assert Limits.from_config(config).max_price_per_hour == 0.5
    assert policy_violation(_offer(0.6), policy) is not None


# -- [limits] max_spend_usd / max_hours = 0: no limit (engine guard, node deadline, dashboard) ---


def test_zero_spend_and_hours_limits_are_off_everywhere(tmp_path: Path) -> None:
    config = load(tmp_path, VAST + "[limits]\nmax_spend_usd = 0\nmax_hours = 0\n")
    limits = Limits.from_config(config)
    assert limits.max_spend_usd is None and limits.max_hours is None
    assert not limits.any  # the engine's guard has nothing to watch: it does not tear down
    watchdog = WatchdogSettings.from_config(config, billing=True)
    assert watchdog.max_hours is None
    assert "MVP_MAX_HOURS" not in watchdog.node_env()


def test_set_spend_and_hours_limits_reach_guard_and_node(tmp_path: Path) -> None:
    config = load(tmp_path, VAST + "[limits]\nmax_spend_usd = 2.5\nmax_hours = 0.5\n")
    limits = Limits.from_config(config)
    assert (limits.max_spend_usd, limits.max_hours, limits.any) == (2.5, 0.5, True)
    assert WatchdogSettings.from_config(config, billing=True).node_env()["MVP_MAX_HOURS"] == "0.5"


RUNPOD = '[provider]\nkind = "runpod"\n\n[runpod]\napi_key = "key-123456"\n\n'


@pytest.mark.parametrize("rented", [VAST, RUNPOD], ids=["vastai", "runpod"])
def test_unset_max_hours_is_a_12_hour_deadline_on_rented_providers(
    tmp_path: Path, rented: str
) -> None:
    """Seed #115: every pod had a deadline; a kept lease that a tool keeps busy still ends."""
    config = load(tmp_path, rented)
    assert Limits.from_config(config).max_hours == 12.0
    assert WatchdogSettings.from_config(config, billing=True).node_env()["MVP_MAX_HOURS"] == "12.0"
    assert RunSettings.from_config(config).limits.max_hours == 12.0


@pytest.mark.parametrize("kind", ["local", "docker"])
def test_unset_max_hours_is_no_deadline_where_nothing_is_rented(
    tmp_path: Path, kind: str
) -> None:
    config = load(tmp_path, f'[provider]\nkind = "{kind}"\n')
    assert Limits.from_config(config).max_hours is None
    assert "MVP_MAX_HOURS" not in WatchdogSettings.from_config(config, billing=False).node_env()


def test_zero_idle_teardown_turns_the_silence_switch_off(tmp_path: Path) -> None:
    off = load(tmp_path, VAST + "[limits]\nidle_teardown_mins = 0\n")
    assert WatchdogSettings.from_config(off, billing=True).idle_mins is None
    unset = load(tmp_path, VAST)
    assert WatchdogSettings.from_config(unset, billing=True).idle_mins == 20.0


# -- [ssh] retry back-off: 0 is a config error naming key, value and source --------------------


@pytest.mark.parametrize("name", ["retry_initial_secs", "retry_max_secs"])
def test_zero_ssh_backoff_is_an_error_naming_key_value_and_source(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, f"[ssh]\n{name} = 0\n")
    message = str(raised.value)
    assert f"[ssh] {name} = 0 from file {tmp_path / 'config.toml'}:2" in message
    assert "> 0" in message
    env = BY_DOTTED[f"ssh.{name}"].env[0]
    with pytest.raises(ConfigError, match=rf"\[ssh\] {name} = '0' from env {env} .*> 0"):
        load(tmp_path, env={env: "0"})


def test_ssh_settings_are_the_configured_ones(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "[ssh]\nretry_initial_secs = 0.25\nretry_max_secs = 3\n"
        "ready_timeout_secs = 42\nconnect_timeout_secs = 7\n",
    )
    ssh = SshSettings.from_config(config)
    assert (ssh.backoff_initial, ssh.backoff_cap, ssh.ready_timeout, ssh.connect_timeout) == (
        0.25,
        3.0,
        42.0,
        7.0,
    )
    # Unset: the key table's defaults, not the dataclass's own.
    default = SshSettings.from_config(load(tmp_path))
    assert (default.backoff_initial, default.backoff_cap) == (1.0, 30.0)
    assert (default.ready_timeout, default.connect_timeout) == (600.0, 15.0)


# -- [lease] reconcile_waits_secs = []: an error (an unclear create must be looked up) ----------


def test_empty_reconcile_waits_is_an_error_naming_key_and_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, "[lease]\nreconcile_waits_secs = []\n")
    message = str(raised.value)
    assert f"[lease] reconcile_waits_secs = [] from file {tmp_path / 'config.toml'}:2" in message
    assert "at least 1" in message


def test_a_zero_reconcile_wait_is_honoured(tmp_path: Path) -> None:
    config = load(tmp_path, "[lease]\nreconcile_waits_secs = [0]\n")
    assert WalkSettings.from_config(config).reconcile_waits_s == (0.0,)


# -- keys whose 0 was already refused: still refused, naming the key --------------------------


@pytest.mark.parametrize(
    ("section", "name", "vast"),
    [
        ("runtime", "node_id", False),
        ("prompt", "max_tokens", False),
        ("ssh", "ready_timeout_secs", False),
        ("ssh", "connect_timeout_secs", False),
        ("lease", "ready_timeout_secs", False),
        ("lease", "delete_timeout_secs", False),
        ("vastai", "poll_interval_secs", True),
        ("vastai", "disk_gb", True),
    ],
)
def test_zero_is_refused_where_it_has_no_meaning(
    tmp_path: Path, section: str, name: str, vast: bool
) -> None:
    head = VAST if vast else ""
    body = f"{head}[{section}]\n{name} = 0\n" if section != "vastai" else f"{head}{name} = 0\n"
    with pytest.raises(ConfigError, match=rf"\[{section}\] {name} = 0 from file .*too small"):
        load(tmp_path, body)


def test_openai_port_zero_means_pick_a_free_one(tmp_path: Path) -> None:
    assert "0 = pick a free one" in BY_DOTTED["prompt.openai_port"].doc
    for port in (0, 8123):
        config = load(tmp_path, f"[prompt]\nopenai_port = {port}\n")
        assert config.settings.prompt.openai_port == port


# -- empty text: an error for a key with a default, unset for an optional one -----------------


@pytest.mark.parametrize(
    ("toml", "label"),
    [
        ('[lease]\nlabel_prefix = ""\n', "[lease] label_prefix"),
        ('[runtime]\nnode_dir = ""\n', "[runtime] node_dir"),
        ('[runtime]\nnode_python = " "\n', "[runtime] node_python"),
        ('[ui]\ntheme = ""\n', "[ui] theme"),
        (VAST + 'api_url = ""\n', "[vastai] api_url"),
        (VAST + 'ssh_user = ""\n', "[vastai] ssh_user"),
    ],
)
def test_empty_text_for_a_key_with_a_default_is_an_error(
    tmp_path: Path, toml: str, label: str
) -> None:
    pattern = re.escape(label) + r" = .* from file .*\(empty\): expected non-empty text"
    with pytest.raises(ConfigError, match=pattern):
        load(tmp_path, toml)


def test_empty_text_for_an_optional_key_is_unset(tmp_path: Path) -> None:
    config = load(tmp_path, VAST + 'gpu_name = ""\nonstart = ""\n\n[model]\ngguf_revision = ""\n')
    vast = config.settings.of(VastaiSection)
    assert vast is not None
    assert vast.gpu_name is None
    assert vast.onstart is None
    assert ModelSettings.from_config(config).gguf_revision is None


# -- the engine builds its settings once and reads only those ----------------------------------


def test_the_engine_runs_on_settings_built_once(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        env={
            "MVP_STATE_DIR": str(tmp_path / "state"),
            "MVP_LOGICAL_NODE_ID": "3",
            "MVP_PROMPT_MAX_TOKENS": "9",
            "MVP_SSH_RETRY_INITIAL_SECS": "0.5",
            "MVP_LEASE_RECONCILE_WAITS_SECS": "0,2",
            "MVP_MAX_PRICE_PER_HOUR": "0",
            "MVP_MAX_SPEND_USD": "0",
        },
    )
    engine = RunEngine(config, lambda event: None, environ={})
    settings = engine.ctx.settings
    assert settings == RunSettings.from_config(config)
    assert settings.runtime == RuntimeSettings.from_config(config)
    assert settings.runtime.node_id == engine.node_id == 3
    assert settings.prompt.max_tokens == 9
    assert settings.ssh.backoff_initial == 0.5
    assert not settings.limits.any
    assert settings.policy.max_price_per_hour is None
    walk = engine.ctx.walk_settings()
    assert (walk.node_id, walk.reconcile_waits_s, walk.max_price_per_hour) == (3, (0.0, 2.0), None)
    assert walk.env == engine.ctx.node_env and engine.ctx.node_env["MVP_LOGICAL_NODE_ID"] == "3"


def test_an_unusable_label_prefix_is_a_config_error_before_anything_starts(
    tmp_path: Path,
) -> None:
    config = load(tmp_path, '[lease]\nlabel_prefix = "My-Runs"\n')
    with pytest.raises(ConfigError, match=r"\[lease\] label_prefix = 'My-Runs' from file .*:2"):
        RunEngine(config, lambda event: None, environ={})

"""Every consumer's settings class takes its figures from the config sections, with no default
of its own (issue 31 §3): `SshSettings` said 900 s / 20 s where [ssh] declares 600 / 15.

Each class names the keys it copies (`KEYS`: field -> dotted key). Built from a default
config, each such field is the key's declared default, and so is the field's own default;
every other field with a default is what the default config gives (a figure fixed in the
class, never set from a key), unless listed in `OWN_DEFAULTS` with the reason. A new class
with `from_config`/`from_section` (or named `*Settings`) must be listed here.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.config import Config, ConfigPaths, load_config
from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.engine.attempt_walk import AttemptSettings
from mvp_tui.engine.cluster import ClusterSettings
from mvp_tui.engine.limits import Limits
from mvp_tui.engine.settings import ModelSettings, RunSettings, RuntimeSettings
from mvp_tui.engine.watchdog import WatchdogSettings
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.providers.docker.client import settings_from_config
from mvp_tui.providers.docker.spec import DockerSettings
from mvp_tui.providers.runpod.client import RunPodSettings
from mvp_tui.providers.runpod.section import RunpodSection
from mvp_tui.providers.runpod.volumes import VolumeSettings
from mvp_tui.ssh.public_key import DEFAULT_IDENTITY
from mvp_tui.ssh.settings import SshSettings
from tests.shipped import shipped_files

ROOT = Path(__file__).resolve().parents[2]


def _runpod(config: Config) -> RunPodSettings:
    runpod = config.settings.of(RunpodSection)
    assert runpod is not None
    return RunPodSettings.from_section(runpod)


def _volume(config: Config) -> VolumeSettings:
    runpod = config.settings.of(RunpodSection)
    assert runpod is not None
    volume = VolumeSettings.from_section(runpod)
    assert volume is not None
    return volume


# (class, the provider whose default config it is built from, keys set besides (dotted ->
# value), how it is built).
CASES: list[tuple[type[Any], str, Mapping[str, str], Callable[[Config], Any]]] = [
    (SshSettings, "local", {}, SshSettings.from_config),
    (WalkSettings, "runpod", {}, WalkSettings.from_config),  # the seed's walk timings
    (RuntimeSettings, "vastai", {}, RuntimeSettings.from_config),
    (ModelSettings, "local", {}, ModelSettings.from_config),
    (RunSettings, "local", {}, RunSettings.from_config),
    (AttemptSettings, "local", {}, AttemptSettings.from_config),
    (ClusterSettings, "local", {}, ClusterSettings.from_config),
    (WatchdogSettings, "local", {}, lambda c: WatchdogSettings.from_config(c, billing=False)),
    (WatchdogSettings, "vastai", {}, lambda c: WatchdogSettings.from_config(c, billing=True)),
    (Limits, "local", {}, Limits.from_config),
    (Limits, "vastai", {}, Limits.from_config),
    (RunPodSettings, "runpod", {}, _runpod),
    (VolumeSettings, "runpod", {"runpod.network_volume": "models"}, _volume),
    (DockerSettings, "docker", {}, settings_from_config),
]

# A default of the class's own that differs from the default config's, and why it may.
OWN_DEFAULTS = {
    "SshSettings.config_file": "None reads no OpenSSH config: a session made without a "
    "config (tests, benches) stays hermetic; a run's is always [ssh] config_file",
    "WalkSettings.image": "a run's create names its config's image; tests name none",
}

# Classes named *Settings that no config section feeds (the node reads its env).
NOT_FROM_CONFIG = {
    "mvp_tui/config/schema.py:Settings",  # the sections themselves
    "mvp_tui/node/instance_api.py:SwitchSettings",
    "mvp_tui/node/roles.py:RoleSettings",
    "mvp_tui/node/settings.py:Settings",
}


def _config(tmp_path: Path, provider: str, extra: Mapping[str, str]) -> Config:
    env = {"MVP_NODE_PROVIDER": provider, **{BY_DOTTED[k].env[0]: v for k, v in extra.items()}}
    return load_config(env=env, paths=ConfigPaths(default=tmp_path / "absent.toml"))


# Keys a class takes as the config resolves them for its provider, not as written: an unset
# max_hours is 12 h on a rented provider (the node's deadline every seed pod had).
RESOLVED: dict[str, Callable[[Config], object]] = {"limits.max_hours": lambda c: c.max_hours}


def _loaded(config: Config, dotted: str) -> object:
    section, name = dotted.split(".", 1)
    typed = config.settings.providers.get(section) or getattr(config.settings, section)
    return getattr(typed, name)


def _default(item: dataclasses.Field[Any]) -> object:
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return dataclasses.MISSING


def _case_id(case: tuple[type[Any], str, Mapping[str, str], Callable[[Config], Any]]) -> str:
    return f"{case[0].__name__}-{case[1]}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_each_field_is_its_keys_declared_default(
    tmp_path: Path, case: tuple[type[Any], str, Mapping[str, str], Callable[[Config], Any]]
) -> None:
    cls, provider, extra, build = case
    config = _config(tmp_path, provider, extra)
    built = build(config)
    assert type(built) is cls
    keys: Mapping[str, str] = cls.KEYS
    fields = {item.name: item for item in dataclasses.fields(cls)}
    wrong = []
    for name, dotted in keys.items():
        assert name in fields, f"{cls.__name__}.KEYS names {name}, which is not a field"
        assert dotted in BY_DOTTED, f"{cls.__name__}.{name}: no key {dotted}"
        spec, loaded = BY_DOTTED[dotted], _loaded(config, dotted)
        value = getattr(built, name)
        resolved = RESOLVED[dotted](config) if dotted in RESOLVED else loaded
        if value != resolved:
            wrong.append(f"{cls.__name__}.{name} = {value!r}, but {spec.label} is {resolved!r}")
        own = _default(fields[name])
        if dotted not in extra and own is not dataclasses.MISSING and own != loaded:
            wrong.append(f"{cls.__name__}.{name} defaults to {own!r} of its own, but "
                         f"{spec.label} declares {loaded!r}: default it to the key's")
    for name, item in fields.items():
        own = _default(item)
        label = f"{cls.__name__}.{name}"
        if name in keys or own is dataclasses.MISSING or label in OWN_DEFAULTS:
            continue
        value = getattr(built, name)
        if value != own:
            wrong.append(f"{label} defaults to {own!r} of its own, but built from the default "
                         f"{provider} config it is {value!r}: default it to what the keys give")
    assert not wrong, "\n".join(wrong)


def test_the_allowed_own_defaults_still_differ(tmp_path: Path) -> None:
    """An entry of OWN_DEFAULTS that no longer differs is stale: remove it."""
    by_name = {case[0].__name__: case for case in CASES}
    for label in OWN_DEFAULTS:
        cls_name, name = label.split(".")
        cls, provider, extra, build = by_name[cls_name]
        own = _default({f.name: f for f in dataclasses.fields(cls)}[name])
        assert getattr(build(_config(tmp_path, provider, extra)), name) != own, label


def test_ssh_timeouts_default_to_the_ssh_keys() -> None:
    """The wrong copies (900 s ready, 20 s connect) are gone: a session made without a
    config waits as long as the keys say, 600 s and 15 s."""
    settings = SshSettings()
    ready, connect = BY_DOTTED["ssh.ready_timeout_secs"], BY_DOTTED["ssh.connect_timeout_secs"]
    assert settings.ready_timeout == ready.default == 600.0
    assert settings.connect_timeout == connect.default == 15.0
    assert settings.backoff_initial == BY_DOTTED["ssh.retry_initial_secs"].default
    assert settings.backoff_cap == BY_DOTTED["ssh.retry_max_secs"].default
    # No identity named (None): the providers' ssh_identity default, not a copy of it.
    assert BY_DOTTED["vastai.ssh_identity"].default == DEFAULT_IDENTITY
    assert BY_DOTTED["runpod.ssh_identity"].default == DEFAULT_IDENTITY


def test_every_settings_class_is_held_here() -> None:
    """A class with `from_config`/`from_section`, or named *Settings, is in CASES (or is fed
    by no config section and says why in NOT_FROM_CONFIG)."""
    held = {case[0].__name__ for case in CASES}
    missing = []
    for path in shipped_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            methods = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
            built = {"from_config", "from_section"} & methods
            if not (node.name.endswith("Settings") or built):
                continue
            where = f"{path.relative_to(ROOT)}:{node.name}"
            if node.name not in held and where not in NOT_FROM_CONFIG:
                missing.append(where)
    assert not missing, f"settings classes no test holds to the keys' defaults: {missing}"

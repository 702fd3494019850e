"""The node contract declared once (mvp_tui/node_protocol.py: `AgentEnv`, `RoleEnv`,
`SwitchEnv`): every variable the engine sets for the node is spelled there and nowhere else
in the shipped code (the user's config names in mvp_tui/config/sections/ are the user's, and
stay there); what the engine writes the agent reads back the same; and a bad value is refused
with the variable, the value and the fix."""

from __future__ import annotations

import ast
import collections
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.node.instance_api import SwitchSettings
from mvp_tui.node.main import run_agent
from mvp_tui.node_protocol import (
    NODE_ENV_GROUPS,
    AgentEnv,
    BootEnv,
    NodeEnvError,
    RoleEnv,
    SwitchEnv,
)
from tests.shipped import shipped_files

ROOT = Path(__file__).resolve().parents[2]
USERS = ROOT / "mvp_tui" / "config" / "sections"  # the user's config keys' env names
HOME = ROOT / "mvp_tui" / "node_protocol.py"
NAME = re.compile(r"MVP_[A-Z0-9_]+")
NODE_NAMES = {name for group in NODE_ENV_GROUPS for name in group.env_names()}


def _spellings() -> dict[str, list[str]]:
    """Every string literal that begins with an `MVP_…` name (what `git grep '"MVP_'` finds,
    f-string parts included), by name: `file:line` of each, config sections left out."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in shipped_files():
        if path.is_relative_to(USERS) or (
            path.name == "section.py" and path.parent.parent == ROOT / "providers"
        ):  # the user's config keys' env names (a provider's own section)
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = NAME.match(node.value)
                if match:
                    found[match.group()].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_each_node_env_name_is_spelled_once_in_node_protocol() -> None:
    spellings = _spellings()
    home = str(HOME.relative_to(ROOT))
    offenders = {
        name: [where for where in spellings[name] if not where.startswith(home + ":")]
        for name in sorted(NODE_NAMES)
    }
    offenders = {name: where for name, where in offenders.items() if where}
    assert not offenders, (
        "a node env name spelled outside mvp_tui/node_protocol.py; use its group's "
        f"env_name() / to_env() / from_env(): {offenders}"
    )
    twice = {name: spellings[name] for name in sorted(NODE_NAMES) if len(spellings[name]) != 1}
    assert not twice, f"declared more than once in node_protocol.py: {twice}"


def test_no_other_mvp_name_is_spelled_in_two_modules() -> None:
    """A new name the engine and the node both spell is a contract name: declare it in
    node_protocol.py instead (the user's config names, in config/sections/, excepted)."""
    spellings = _spellings()
    shared = {
        name: where
        for name, where in spellings.items()
        if len({w.split(":")[0] for w in where}) > 1
    }
    assert not shared, f"one MVP_ name, several modules: {shared}"


def test_the_groups_declare_each_name_once() -> None:
    names = [name for group in NODE_ENV_GROUPS for name in group.env_names()]
    assert len(names) == len(set(names)) and len(names) > 40
    for group in NODE_ENV_GROUPS:
        for item in dataclasses.fields(group):  # type: ignore[arg-type]
            assert set(item.metadata) == {"env", "parse", "fix", "passthrough"}, item.name
            assert item.metadata["fix"], f"{group.__name__}.{item.name} has no fix to tell"


# Values the generic sample below cannot make (a choice's other option).
CHOICES = {"engine_host": "0.0.0.0", "role": "worker"}


def _sample(item: dataclasses.Field[Any]) -> Any:
    """A value other than the default that the parser takes back unchanged."""
    default = item.default
    if item.name in CHOICES:
        return CHOICES[item.name]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int) or default is None:
        return (default or 0) + 3
    if isinstance(default, float):
        return default + 1.5
    if isinstance(default, tuple):
        return ("a:1", "b:2")
    if isinstance(default, str) and default.startswith("https://"):  # a base URL
        return f"https://v-{item.name.replace('_', '-')}.example/v9"
    return f"v-{item.name.replace('_', '-')}"


@pytest.mark.parametrize("group", NODE_ENV_GROUPS, ids=lambda g: g.__name__)
def test_every_field_round_trips_through_to_env_and_from_env(group: type[Any]) -> None:
    assert group.from_env({}) == group() and group().to_env() == {}
    values = {item.name: _sample(item) for item in dataclasses.fields(group)}
    written = group(**values)
    env = written.to_env()
    assert set(env) == set(group.env_names())
    assert all(isinstance(v, str) for v in env.values())
    assert group.from_env(env) == written
    # `always` writes a default too, and it reads back as the default.
    every = tuple(values)
    assert group.from_env(group().to_env(every)) == group()


BAD = "not-a-value"


def _refusing() -> list[tuple[type[Any], str]]:
    cases = []
    for group in NODE_ENV_GROUPS:
        for item in dataclasses.fields(group):
            try:
                item.metadata["parse"](BAD)
            except ValueError:
                cases.append((group, item.name))
    return cases


@pytest.mark.parametrize(("group", "field"), _refusing(), ids=lambda c: getattr(c, "__name__", c))
def test_a_bad_value_names_the_variable_the_value_and_the_fix(
    group: type[Any], field: str
) -> None:
    name = group.env_name(field)
    with pytest.raises(NodeEnvError) as refused:
        group.from_env({name: BAD})
    text = str(refused.value)
    assert text.startswith(f"{name}={BAD!r} ") and "; fix: " in text, text
    assert refused.value.name == name


def test_the_refusing_fields_cover_numbers_flags_and_choices() -> None:
    refusing = {field for _, field in _refusing()}
    assert {"engine_port", "ready_timeout_s", "engine_port_fallback", "engine_host",
            "role", "gpu_layers", "max_hours", "boot_grace_s", "prefetch"} <= refusing


def test_the_agent_reports_a_bad_variable_with_its_fix(tmp_path: Path) -> None:
    out = tmp_path / "frames"
    with out.open("wb") as sink:
        code = run_agent({"MVP_ENGINE_PORT_FALLBACK": "maybe"}, sink.fileno())
    assert code == 2
    text = out.read_text()
    assert "MVP_ENGINE_PORT_FALLBACK='maybe' is not a flag; fix: set 1" in text, text


def test_the_switch_turns_a_bad_value_into_its_failed_verdict() -> None:
    settings = SwitchSettings({"MVP_MAX_HOURS": "soon", "MVP_NODE_PROVIDER": "vastai"})
    assert settings.enabled and settings.provider == "vastai"
    assert settings.problem is not None
    assert settings.problem.startswith("MVP_MAX_HOURS='soon' is not a number; fix: set hours")
    assert settings.problem.endswith("the node switch cannot enforce it")


def test_the_engine_writes_only_declared_names(tmp_path: Path) -> None:
    """What a rented node's env holds: the agent's, the switch's, the role's, nothing else
    of ours (HF_TOKEN and the seed's CUDA_DEVICE_SCHEDULE pass through as they are)."""
    from mvp_tui.config import load_config
    from mvp_tui.config.loader import ConfigPaths
    from mvp_tui.engine.settings import ModelSettings, RuntimeSettings, create_env, node_env
    from mvp_tui.engine.watchdog import WatchdogSettings

    env = {"MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": "k" * 24}
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    environ = {name: "2" for group in NODE_ENV_GROUPS for name in group.passthrough_names()}
    environ[AgentEnv.env_name("hf_endpoint")] = "https://hub.example"  # a base URL
    node = node_env(
        RuntimeSettings.from_config(config), ModelSettings.from_config(config),
        provider="vastai", run_id="r-1", environ={**environ, "HF_TOKEN": "t"},
    )
    node.update(WatchdogSettings.from_config(config, billing=True).node_env(1.5))
    node.update(RoleEnv(role="main", rpc_servers=("127.0.0.1:1",)).to_env())
    for written in (node, create_env(node)):
        ours = {k for k in written if k.startswith("MVP_")}
        assert ours <= NODE_NAMES, ours - NODE_NAMES
    assert AgentEnv.from_env(node).run_id == "r-1"
    switch = SwitchEnv.from_env(node)
    assert (switch.watchdog_provider, switch.lease_started_at) == ("vastai", 1.5)


def _scripts_for_the_node() -> dict[str, str]:
    """What the engine has run on a node before (or beside) the agent: the start commands'
    shell (RunPod's boot, Vast's onstart and its key install, the boot guard, the prefetch)
    and the Docker launcher's Python."""
    from mvp_tui.providers.docker import spec as docker_spec
    from mvp_tui.providers.runpod import boot as runpod_boot
    from mvp_tui.providers.vastai import host_key as vast_host_key
    from mvp_tui.providers.vastai.boot import vast_onstart

    return {
        "runpod boot": runpod_boot.BOOT_SCRIPT,
        "vast onstart": vast_onstart("echo hi"),
        "vast key install": vast_host_key.install_script(),
        "docker launcher": docker_spec._STDIN_LAUNCH.format(
            env=docker_spec.AGENT_BYTES_ENV, secrets_env=docker_spec.STDIN_ENV_BYTES_ENV
        ),
    }


def test_the_scripts_for_the_node_read_only_declared_names() -> None:
    """A name in a start script but in no group is a contract spelled twice (once where the
    engine sets it, once in the script)."""
    pieces = re.compile(re.escape(BootEnv.env_name("host_key")) + r"_(?![A-Z])")  # Vast's _1, _2…
    found: dict[str, set[str]] = {}
    for what, script in _scripts_for_the_node().items():
        names = set(NAME.findall(pieces.sub("", script)))
        assert names, f"{what}: no MVP_ name at all (the sample no longer reaches the script)"
        found[what] = names - NODE_NAMES
    assert not any(found.values()), {what: sorted(n) for what, n in found.items() if n}
    # And each boot name is read by one of them; not the RPC build cache (the agent reads it)
    # nor the GPUs' copy (set for the node's own tools, as the seed's Docker spec does).
    used = set().union(*(NAME.findall(s) for s in _scripts_for_the_node().values()))
    elsewhere = {BootEnv.env_name("llama_cache"), BootEnv.env_name("docker_gpus")}
    unread = set(BootEnv.env_names()) - used - elsewhere
    assert not unread, f"declared for the boot, read by no script: {sorted(unread)}"

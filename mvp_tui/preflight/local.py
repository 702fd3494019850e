"""The checks of this machine: the configuration as loaded, the nodes' SSH identity, the
serving engine a local node would start, and the state dir."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.guards import readable_by_others
from mvp_tui.node.engine import engine_found
from mvp_tui.node_protocol import AgentEnv
from mvp_tui.preflight.outcome import Check

LAYERS = ("file", "env", "flag")
ENGINE_FIX = (
    "install the engine into this Python (`pip install 'llama-cpp-python[server]'`, or "
    "`./scripts/setup.sh local` in a checkout), put llama-server on PATH, or set "
    f"{AgentEnv.env_name('engine_cmd')} to its command line"
)


def config_check(config: Config) -> Check:
    """The configuration loaded, so every key in it is valid (a bad one exits 2 before any
    check): which file, how many keys each layer set, and the warnings loading gave."""
    sources = [*config.sources.values(), *config.unused.values()]
    layers = Counter(s.layer for s in sources if s.layer in LAYERS)
    unused = len(config.unused)
    total = sum(layers.values())
    parts = ", ".join(f"{layers[layer]} from {layer}" for layer in LAYERS if layers[layer])
    file = str(config.file) if config.file else "none (no config file: built-in defaults)"
    detail = (
        f"every key valid; file {file}; {total} key(s) set"
        + (f" ({parts})" if parts else "")
        + (f", {unused} of them for a provider not selected" if unused else "")
        + f"; provider {config.provider} (from {config.sources['provider.kind']})"
    )
    return Check.ok("config", detail, warnings=(*config.warnings, *config.cautions))


async def identity_check(configs: Sequence[Config]) -> Check:
    """The SSH identity of each rented provider that applies (`configs`, one per provider):
    loaded as a run loads it (a private key asyncssh reads, or one held by ssh-agent), and
    not readable by others. Skipped when no rented provider applies."""
    from mvp_tui.ssh.errors import IdentityError
    from mvp_tui.ssh.identity import IdentitySource, load_identity

    name = "ssh identity"
    wanted = _identities(configs)
    if not wanted:
        return Check.skipped(
            name, "no rented provider is configured (nodes on this machine need no SSH key)",
            "set a Vast.ai or RunPod API key; its nodes are reached with [vastai]/[runpod] "
            "ssh_identity",
        )
    found: list[str] = []
    for path, key in wanted.items():
        try:
            identity = await load_identity(path, config_key=key)
        except IdentityError as exc:
            return Check.failed(name, exc.message, exc.fix)
        loose = readable_by_others(path, f"SSH identity {path} (set by {key})")
        if loose and identity.source is IdentitySource.FILE:
            detail, _, fix = loose[0].partition("; fix: ")
            return Check.failed(name, detail, fix)
        via = "" if identity.source is IdentitySource.FILE else ", through ssh-agent"
        found.append(f"{path} ({identity.public_openssh.split()[0]} {identity.fingerprint}{via})")
    return Check.ok(name, "; ".join(found))


def _identities(configs: Sequence[Config]) -> dict[Path, str]:
    """Each distinct key file the providers name, with the setting it comes from."""
    from mvp_tui.ssh.public_key import DEFAULT_IDENTITY
    from mvp_tui.ssh.settings import SshSettings

    wanted: dict[Path, str] = {}
    for config in configs:
        ssh = SshSettings.from_config(config)
        path = Path(ssh.identity_path or DEFAULT_IDENTITY).expanduser()
        wanted.setdefault(path, ssh.identity_key)
    return wanted


def engine_check(config: Config) -> Check:
    """The engine a node on this machine starts, found as the node agent finds it. Needed
    for provider local; elsewhere the engine runs on the node, so none here is not a fault."""
    name = "local engine"
    found = engine_found(os.environ.get(AgentEnv.env_name("engine_cmd"), "").strip())
    if found is not None:
        return Check.ok(name, found)
    missing = "no serving engine here: llama-server is not on PATH and llama_cpp is not " \
        "installed for this Python"
    if config.kind.child_process:
        return Check.failed(name, f"{missing} (provider local serves on this machine)",
                            ENGINE_FIX)
    return Check.skipped(
        name, f"{missing}; provider {config.provider} serves on its own node",
        f"to serve on this machine too: {ENGINE_FIX}",
    )


def state_dir_check(config: Config) -> Check:
    """The state dir takes run records, probed as `up` probes it before anything is rented."""
    from mvp_tui.lease.state_probe import RECORD_ROOM_BYTES, probe_state_dir

    source = config.sources.get("state.dir") or "default"
    try:
        runs = probe_state_dir(config.state_dir, source)
    except ConfigError as exc:
        return Check.failed("state dir", exc.message, exc.fix)
    return Check.ok(
        "state dir",
        f"{config.state_dir} ({source}) takes run records: {RECORD_ROOM_BYTES // 1024} KiB "
        f"written atomically under {runs} and removed",
    )

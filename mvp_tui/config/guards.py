"""The configuration's trust rules, checked once the values are in: where an unauthenticated
RPC server would listen, where the API keys come from, that they only travel over https (or
to loopback), and who can read the file holding them. Refusals are `ConfigError`s (exit 2,
nothing started); the rest are warning lines."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.config.toml_file import TomlLayer
from mvp_tui.config.values import LAYER_RANK, ConfigError, Source
from mvp_tui.node_protocol import AgentEnv, base_url_problem, shown_url
from mvp_tui.providers import registry

# A worker's ggml-rpc-server: ggml RPC has no authentication and lets a client read and
# write the server's memory, so where it listens decides who owns that process.
LOCAL_ACK_FLAG = "--local-rpc-unauthenticated"
LOCAL_ACK = (
    f"{LOCAL_ACK_FLAG} (env MVP_LOCAL_RPC_UNAUTHENTICATED=true, or [runtime] "
    "local_rpc_unauthenticated = true)"
)


def check_multinode_rpc(
    provider: str, values: Mapping[str, object], sources: Mapping[str, Source]
) -> None:
    """Refuse a multi-node run whose workers' RPC servers others could reach: on a Docker
    bridge network always (every container on it reaches them), on this machine's loopback
    (provider local, Docker's host network) unless acknowledged."""
    nodes = values.get("runtime.nodes")
    here = registry.find(provider)
    if not isinstance(nodes, int) or nodes <= 1 or here is None or not here.on_this_machine:
        return
    asked = f"[runtime] nodes = {nodes} from {sources['runtime.nodes']}"
    network = values.get("docker.network")  # read only when provider docker runs
    if network == "bridge":
        raise ConfigError(
            f"{asked} with provider docker on [docker] network = 'bridge' (from "
            f"{sources['docker.network']}): the workers' ggml-rpc-server, which has no "
            "authentication and gives its clients the process's memory, would be reachable "
            "from every container on the bridge network",
            fix="use [runtime] nodes = 1 on a bridge network, --docker-network host with "
            f"{LOCAL_ACK_FLAG}, or a rented provider",
        )
    if values.get("runtime.local_rpc_unauthenticated"):
        return
    where = f"provider {provider}" + (" on the host network" if network else "")
    raise ConfigError(
        f"{asked} with {where}: the workers' ggml-rpc-server listens on this machine's "
        "loopback with no authentication, so any local user can read and write that "
        "process's memory (next to a process that holds your cloud keys)",
        fix=f"acknowledge with {LOCAL_ACK} on a machine only you use, or rent the nodes",
    )


@dataclass(frozen=True, slots=True)
class KeyFile:
    key: str  # "vastai.api_key"
    file_key: str  # "vastai.api_key_file"
    flag: str  # the key's own flag, which puts it in argv
    file_flag: str


def key_files() -> list[KeyFile]:
    """Each provider's API key and the key naming a file that holds it (their kinds say)."""
    found = []
    for kind in registry.kinds():
        if kind.api_key_key and kind.api_key_file_key:
            key, file = BY_DOTTED[kind.api_key_key], BY_DOTTED[kind.api_key_file_key]
            found.append(KeyFile(key.dotted, file.dotted, key.flag or "", file.flag or ""))
    return found


def read_key_files(values: dict[str, object], sources: dict[str, Source]) -> list[str]:
    """Put each API key given as a file in place (the key's own value wins when set in the
    same or a later layer); one warning line per key taken from a flag, which `ps` and
    shell history show. The key itself is never in a message."""
    warnings: list[str] = []
    for item in key_files():
        if item.key not in values:
            continue  # another provider's key: not parsed for this run
        path, file_source = values.get(item.file_key), sources.get(item.file_key)
        key_source = sources[item.key]
        if isinstance(path, Path) and file_source is not None:
            file_rank, key_rank = LAYER_RANK[file_source.layer], LAYER_RANK[key_source.layer]
            if values[item.key] is None or file_rank > key_rank:
                values[item.key] = _read_key(path, item, file_source)
                sources[item.key] = Source(file_source.layer, f"{file_source.where} ({path})")
                warnings += readable_by_others(path, f"the API key file {path}")
                continue
        if key_source.layer == "flag" and values[item.key] is not None:
            warnings.append(
                f"{item.flag} puts the API key in this process's argv (visible in ps to "
                f"every local user) and in your shell history; use {item.file_flag} PATH or "
                "the key's environment variable instead"
            )
    return warnings


# The base URLs a secret is sent to, each with an https example for the fix. A
# marketplace URL carries its API key on every call; the hub's carries HF_TOKEN when set.
def key_urls() -> list[tuple[str, str]]:
    """(dotted key, its declared default as the example) for each provider's API URL."""
    return [
        (kind.api_url_key, str(BY_DOTTED[kind.api_url_key].default))
        for kind in registry.kinds()
        if kind.api_url_key
    ]
HUB_URL_ENV = AgentEnv.env_name("hf_endpoint")  # the node's hub, read here too
HUB_TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def check_key_urls(
    values: Mapping[str, object], sources: Mapping[str, Source], env: Mapping[str, str]
) -> None:
    """Refuse a key-bearing base URL that is not scheme, host, port and path (user info, a
    query or a fragment: `http://evil.example?@127.0.0.1` sends the key to evil.example), or
    that is plain http to anything but loopback (a local fake or the rehearsal): the key
    would cross the network readable by anyone on the path. Checked before any request is
    made; the value is shown with what may hide a secret masked."""
    for dotted, example in key_urls():
        url = values.get(dotted)
        if not isinstance(url, str):
            continue
        problem = base_url_problem(url, plain_http_ok=False)
        if problem:
            section, name = dotted.split(".")
            raise ConfigError(
                f"[{section}] {name} = {shown_url(url)!r} from {sources[dotted]} {problem}: "
                f"the {section} API key is sent there on every call",
                fix=f'use https and the host only (e.g. "{example}"), or http:// only to '
                "127.0.0.1/localhost (a local fake)",
            )
    token = next((name for name in HUB_TOKEN_ENVS if env.get(name)), None)
    hub = env.get(HUB_URL_ENV, "").strip()
    problem = base_url_problem(hub, plain_http_ok=not token) if hub else None
    if problem:
        held = f", and {token} is set: the token is sent there" if token else ""
        raise ConfigError(
            f"env {HUB_URL_ENV} = {shown_url(hub)!r} {problem}{held}",
            fix=f"use https and the host only (e.g. https://huggingface.co), or unset "
            f"{HUB_URL_ENV} (the hub), or http:// only to 127.0.0.1/localhost (a local mirror)",
        )


def _read_key(path: Path, item: KeyFile, source: Source) -> str:
    label = f"[{item.file_key.replace('.', '] ', 1)} = {str(path)!r} (from {source})"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"{label}: cannot read it: {why}", fix="name a readable file") from None
    key = text.strip()
    if not key or "\n" in key:
        raise ConfigError(
            f"{label}: the file must hold the key alone, on one line",
            fix="write only the API key into the file",
        )
    return key


def config_file_warnings(toml: TomlLayer | None, secret_keys: list[str]) -> list[str]:
    """A warning when the config file holds an API key and others may read it."""
    if toml is None or not any(key in toml.values for key in secret_keys):
        return []
    return readable_by_others(toml.path, f"the config file {toml.path} holds an API key and")


def readable_by_others(path: Path, what: str) -> list[str]:
    """A warning line when users other than the owner may read `path` (`what` names it)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return []
    if not mode & 0o077:
        return []
    return [f"{what} is readable by others (mode {mode:o}); fix: chmod 600 {path}"]


def check_hub_paths(values: Mapping[str, object], sources: Mapping[str, Source]) -> None:
    """Refuse a `[model]` hub repo, file or revision with an empty, `.` or `..` part: each
    becomes a directory of the node's model cache and a segment of the hub URL, so `..`
    would put the model (or read a cached one) outside its repo's directory."""
    for name in ("gguf_repo", "gguf_file", "gguf_revision"):
        dotted = f"model.{name}"
        value = values.get(dotted)
        if not isinstance(value, str):
            continue
        parts = value.split("/")
        if value.strip() and all(p not in ("", ".", "..") for p in parts):
            continue
        raise ConfigError(
            f"[model] {name} = {value!r} from {sources[dotted]} has an empty, '.' or '..' part: "
            "it names a place outside the repo (the node's cache and the hub URL use it)",
            fix=f"give the repo's own {name.removeprefix('gguf_')} name"
            + (' (a branch, tag or commit, e.g. "main")' if name == "gguf_revision" else ""),
        )


def check_owner_tag(values: Mapping[str, object], sources: Mapping[str, Source]) -> None:
    """Refuse an `[lease] owner_tag` that cannot be a label's owner part: labels carry it, and
    a sweep destroys only what carries it, so a tag that would not parse one way is unusable."""
    from mvp_tui.install_tag import check_owner_tag as usable

    value = values.get("lease.owner_tag")
    if not isinstance(value, str):
        return
    try:
        usable(value)
    except ValueError:
        raise ConfigError(
            f"[lease] owner_tag = {value!r} from {sources['lease.owner_tag']} is not usable",
            fix="use 6-16 lowercase ASCII letters or digits, the same on each machine that "
            "should share this identity (or unset it: a tag is made and kept in the state dir)",
        ) from None

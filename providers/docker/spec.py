"""What a node container is made of, as pure values: settings from the config, the GPU
request, the model mounts and the `containers.create` arguments (no daemon is contacted
here, so all of it is unit-tested without Docker)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from mvp_tui.config.sections.runtime import ImageSection
from mvp_tui.config.values import Source
from mvp_tui.labels import parse_label
from mvp_tui.node_protocol import WEIGHTS_CHANNEL, WEIGHTS_LOADED, AgentEnv, BootEnv
from mvp_tui.providers.docker.section import DockerSection
from mvp_tui.secrets import is_secret_name

CONTAINER_PREFIX = "mvp-orchestrator"  # the seed's LocalDockerPlugin prefix
CACHED_MODEL_DIR = "/models/cached"
LOCAL_MODEL_DIR = "/models/local"
BRIDGE_ENGINE_PORT = 8080  # the engine's port inside a bridge-network container
NETWORKS = ("bridge", "host")
GPUS_KEY = "[docker] gpus"
IMAGE_KEY = "[docker] image"
CACHED_KEY = "[docker] cached_model_host_path"
NETWORK_KEY = "[docker] network"
DOCKER_GPUS_ENV = BootEnv.env_name("docker_gpus")  # as the seed's node spec has
# Labels every node container carries: how leftovers are found (`list_by_label`, `down`).
LABEL_MANAGED = "mvp.managed-by"
LABEL_LEASE = "mvp.lease"
LABEL_RUN = "mvp.run"
LABEL_NODE = "mvp.node"
LABEL_ATTEMPT = "mvp.attempt"
MANAGED_BY = "mvp-tui"

# The agent (its zipapp, mvp_tui/agent_bundle.py) arrives on the container's stdin, through
# the attach we hold anyway, its length in the env: an archive upload costs the daemon a
# mount and an extract (50-100 ms of a ~340 ms container start, bench/bench_docker.py). The
# launcher reads exactly that many bytes with raw reads (the agent's own stdin reader takes
# over from there, nothing read ahead), writes them to a private file under the container's
# temp directory (zipimport reads modules from a file) and runs its `__main__` in the same
# process as `python3 agent.pyz` would: no second interpreter start, and none of runpy's or
# tempfile's imports (~10 ms).
# The node env's secrets (HF_TOKEN and any other name with KEY, TOKEN, SECRET or PASSWORD)
# follow the agent on stdin as one JSON object, its length in MVP_STDIN_ENV_BYTES: in the
# container's Env they would stay readable (`docker inspect`, the daemon's config.v2.json)
# for as long as the container lives.
AGENT_BYTES_ENV = BootEnv.env_name("agent_bytes")
STDIN_ENV_BYTES_ENV = BootEnv.env_name("stdin_env_bytes")
_STDIN_LAUNCH = """\
import json, os, sys, zipimport
def read(n, what):
    data = bytearray()
    while len(data) < n:
        chunk = os.read(0, min(65536, n - len(data)))
        if not chunk:
            sys.exit("mvp-node: stdin closed before the whole " + what + " arrived")
        data += chunk
    return bytes(data)
data = read(int(os.environ[{env!r}]), "agent")
os.environ.update(json.loads(read(int(os.environ.get({secrets_env!r}) or 0), "env") or b"{{}}"))
path = os.path.join(os.environ.get("TMPDIR") or "/tmp", "mvp-node-%d.pyz" % os.getpid())
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
with os.fdopen(fd, "wb") as out:
    out.write(data)
sys.argv = [path]
sys.path.insert(0, path)
agent = zipimport.zipimporter(path)
try:
    exec(agent.get_code("__main__"), {{"__name__": "__main__", "__loader__": agent,
                                      "__file__": path + "/__main__.py"}})
finally:
    os.unlink(path)
"""
# On a bridge network the engine must listen on the container's interface for the published
# port to reach it (loopback-only publishing keeps it off the host's other interfaces). Only
# the engine: the agent binds a worker's ggml-rpc-server on loopback whatever this says, and
# the config refuses more than one node on a bridge network.
BRIDGE_ENGINE_HOST = "0.0.0.0"


class GpuSpecError(ValueError):
    """`[docker] gpus` is not one of the accepted forms."""


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What `[docker] gpus` asks for: nothing, every GPU, a count, or device ids."""

    count: int = 0  # -1 = all
    device_ids: tuple[str, ...] = ()

    @property
    def wants_gpus(self) -> bool:
        return self.count != 0 or bool(self.device_ids)

    def describe(self) -> str:
        if self.device_ids:
            return "GPU devices " + ",".join(self.device_ids)
        if self.count == -1:
            return "all GPUs"
        return f"{self.count} GPU(s)" if self.count else "no GPU"

    def device_request(self) -> dict[str, Any] | None:
        """The Engine API's DeviceRequest (as `docker run --gpus` sends it)."""
        if not self.wants_gpus:
            return None
        request: dict[str, Any] = {"Driver": "", "Capabilities": [["gpu"]]}
        if self.device_ids:
            request.update(Count=0, DeviceIDs=list(self.device_ids))
        else:
            request.update(Count=self.count, DeviceIDs=None)
        return request


def parse_gpus(raw: str) -> GpuRequest:
    """`all`, a count (`2`), device ids (`0,1`, `device=0,1`, `GPU-<uuid>`), or `none`/``."""
    text = raw.strip().strip('"').strip()
    low = text.lower()
    if low in ("", "none", "0", "off", "false", "no"):
        return GpuRequest()
    if low == "all":
        return GpuRequest(count=-1)
    if low.startswith("device="):
        text = text[len("device=") :]
    elif text.isdigit():
        return GpuRequest(count=int(text))
    ids = tuple(part.strip() for part in text.split(",") if part.strip())
    if not ids or not all(re.fullmatch(r"[A-Za-z0-9_.:-]{1,80}", part) for part in ids):
        raise GpuSpecError(
            f"{raw!r} is not a GPU request: use all, a count (e.g. 1), device ids (e.g. "
            "device=0,1), or none"
        )
    return GpuRequest(device_ids=ids)


@dataclass(frozen=True, slots=True)
class Mount:
    host_path: str
    container_path: str
    read_only: bool = True

    def api(self) -> dict[str, Any]:
        return {
            "Type": "bind",
            "Source": self.host_path,
            "Target": self.container_path,
            "ReadOnly": self.read_only,
        }


@dataclass(frozen=True, slots=True)
class DockerSettings:
    """The `[docker]` keys as the provider uses them, each with where its value came from
    (so an error can name the key and the source); built by `settings_from_config`
    (providers/docker/client.py). A field copied from a key (`KEYS`) defaults to its declared
    default, the image to [image] node's (as an unset [docker] image); the rest are fixed here."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {
        "gpus": "docker.gpus",
        "network": "docker.network",
        "cached_model_host_path": "docker.cached_model_host_path",
    }

    image: str = ImageSection.node  # [docker] image, else [image] node
    image_source: str = f"[image] node, from {Source('default')}"
    gpus: str = DockerSection.gpus
    gpus_source: str = str(Source("default"))
    gpus_explicit: bool = False  # the default "all" means "all there are": none on a CPU box
    network: str = DockerSection.network
    cached_model_host_path: Path | None = DockerSection.cached_model_host_path
    cached_model_source: str = str(Source("default"))
    container_prefix: str = CONTAINER_PREFIX
    stop_grace_s: float = 2.0  # `docker stop -t 2`, as the seed's local Docker node
    shutdown_wait_s: float = 5.0  # after "shutdown" on stdin, before the stop
    remove_confirm_s: float = 30.0
    extra_env: Mapping[str, str] = field(default_factory=dict)


def gpu_request(settings: DockerSettings) -> GpuRequest:
    try:
        return parse_gpus(settings.gpus)
    except GpuSpecError as exc:
        raise GpuSpecError(
            f"{GPUS_KEY} = {settings.gpus!r} (from {settings.gpus_source}): {exc}"
        ) from None


def container_name(prefix: str, label: str) -> str:
    """`{prefix}-{run}-{node}` as the seed's local Docker node names it (the label's
    prefix, run and node); a
    label we did not make is used whole, made safe for Docker."""
    parsed = _parse_any(label)
    if parsed is not None:
        return f"{prefix}-{parsed[0]}-{parsed[1]}"
    return prefix + "-" + re.sub(r"[^A-Za-z0-9_.-]", "-", label)[:100]


def _parse_any(label: str) -> tuple[str, int, int] | None:
    """(run, node, attempt) of one of our labels, whatever its prefix."""
    prefix = label.split("-", 1)[0]
    parsed = parse_label(label, prefix)
    return None if parsed is None else (parsed.run_id, parsed.node_id, parsed.attempt)


def labels(label: str) -> dict[str, str]:
    out = {LABEL_MANAGED: MANAGED_BY, LABEL_LEASE: label}
    parsed = _parse_any(label)
    if parsed is not None:
        out[LABEL_RUN] = parsed[0]
        out[LABEL_NODE] = str(parsed[1])
        out[LABEL_ATTEMPT] = str(parsed[2])
    return out


def cached_model_target(host_path: Path) -> str:
    """Where the node sees `[docker] cached_model_host_path`: `/models/cached/<file>`, the
    file's name after links are resolved (the seed canonicalises it too)."""
    return f"{CACHED_MODEL_DIR}/{host_path.expanduser().resolve().name}"


def _name(field: str) -> str:
    return AgentEnv.env_name(field)


def model_mounts(
    settings: DockerSettings, env: Mapping[str, str]
) -> tuple[dict[str, str], list[Mount]]:
    """The node env with its model path rewritten to where the container sees the file, and
    the read-only mounts that put it there. `[docker] cached_model_host_path` wins over
    `[model] gguf_local_path` and removes any download source (the seed's rule)."""
    out = dict(env)
    mounts: list[Mount] = []
    if settings.cached_model_host_path is not None:
        host = settings.cached_model_host_path.expanduser().resolve()
        target = cached_model_target(settings.cached_model_host_path)
        mounts.append(Mount(str(host), target))
        for key in ("gguf_repo", "gguf_file", "gguf_revision"):
            out.pop(_name(key), None)
        out[_name("gguf_local_path")] = target
    elif local := out.get(_name("gguf_local_path"), "").strip():
        host = Path(local).expanduser().resolve()
        target = f"{LOCAL_MODEL_DIR}/{host.name}"
        mounts.append(Mount(str(host), target))
        out[_name("gguf_local_path")] = target
    if tokenizer := out.get(_name("tokenizer_local_path"), "").strip():
        host = Path(tokenizer).expanduser().resolve()
        target = f"{LOCAL_MODEL_DIR}/tokenizer/{host.name}"
        mounts.append(Mount(str(host), target))
        out[_name("tokenizer_local_path")] = target
    return out, mounts


def stdin_env(settings: DockerSettings, request_env: Mapping[str, str]) -> dict[str, str]:
    """The node env's secrets, which go down the attached stdin after the agent."""
    env, _ = model_mounts(settings, request_env)
    env.update(settings.extra_env)
    return {k: v for k, v in env.items() if is_secret_name(k)}


def container_env(settings: DockerSettings, request_env: Mapping[str, str]) -> dict[str, str]:
    """The container's Env: the node env without its secrets (see `stdin_env`)."""
    env, _ = model_mounts(settings, request_env)
    env.update(settings.extra_env)
    # Our end of the attach stream closing (we exited, crashed, were killed) closes the
    # container's stdin (StdinOnce): the agent then shuts down and the container goes.
    env.update(AgentEnv(stdin_eof_shutdown=True).to_env())
    env[DOCKER_GPUS_ENV] = settings.gpus  # the seed's Docker node spec carries it
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop(_name("control_fifo"), None)
    for name in [k for k in env if is_secret_name(k)]:
        del env[name]
    if settings.network == "bridge":
        bridge = AgentEnv(engine_port=BRIDGE_ENGINE_PORT, engine_host=BRIDGE_ENGINE_HOST)
        env.update(bridge.to_env())
    return env


def container_command(python: str) -> list[str]:
    launch = _STDIN_LAUNCH.format(env=AGENT_BYTES_ENV, secrets_env=STDIN_ENV_BYTES_ENV)
    return [python, "-c", launch]


def stdin_env_bytes(env: Mapping[str, str]) -> bytes:
    """What follows the agent down stdin: the secrets as JSON (empty when there are none)."""
    return json.dumps(dict(env), ensure_ascii=True).encode() if env else b""


def create_config(
    settings: DockerSettings,
    *,
    image: str,
    label: str,
    request_env: Mapping[str, str],
    agent_bytes: int = 0,
    stdin_env_length: int = 0,
) -> tuple[str, dict[str, Any]]:
    """(container name, the body of `POST /containers/create`) for one node: what the seed's
    `docker run --rm -i --add-host host.docker.internal:host-gateway --name … --gpus …
    -e …` sends, plus labels, the model mounts and the engine port."""
    env = {**container_env(settings, request_env), AGENT_BYTES_ENV: str(agent_bytes)}
    if stdin_env_length:
        env[STDIN_ENV_BYTES_ENV] = str(stdin_env_length)
    _, mounts = model_mounts(settings, request_env)
    python = request_env.get(_name("node_python"), "").strip() or AgentEnv.node_python
    host_config: dict[str, Any] = {
        "AutoRemove": True,  # --rm
        "NetworkMode": settings.network,
        "Mounts": [m.api() for m in mounts],
    }
    config: dict[str, Any] = {
        "Image": image,
        "Cmd": container_command(python),
        "Labels": labels(label),
        "Env": [f"{k}={v}" for k, v in sorted(env.items())],
        # -i: stdin open, attached once; when our attach ends, the agent's stdin closes.
        "OpenStdin": True,
        "StdinOnce": True,
        "AttachStdin": True,
        "AttachStdout": True,
        "AttachStderr": True,
        "Tty": False,
        "HostConfig": host_config,
    }
    if settings.network == "bridge":
        host_config["ExtraHosts"] = ["host.docker.internal:host-gateway"]
        # Published on loopback only, on a port the daemon picks.
        host_config["PortBindings"] = {f"{BRIDGE_ENGINE_PORT}/tcp": [{"HostIp": "127.0.0.1"}]}
        config["ExposedPorts"] = {f"{BRIDGE_ENGINE_PORT}/tcp": {}}
    device = gpu_request(settings).device_request()
    if device is not None:
        host_config["DeviceRequests"] = [device]
    return container_name(settings.container_prefix, label), config


def published_url_rewrite(host_port: int) -> Callable[[bytes], bytes]:
    """For a bridge container: the node's `WeightsLoaded` frame names the engine as the
    container sees it (0.0.0.0:8080); mvp-tui reaches it on the published loopback port.
    The line is rewritten to that URL (the node's own is kept as `node_base_url`); every
    other line passes unchanged. Interim, until the run engine asks the provider
    (`engine_url`) for non-SSH nodes."""
    url = f"http://127.0.0.1:{host_port}"
    loaded_mark, weights_mark = f'"{WEIGHTS_LOADED}"'.encode(), f'"{WEIGHTS_CHANNEL}"'.encode()

    def rewrite(line: bytes) -> bytes:
        if loaded_mark not in line or weights_mark not in line:
            return line
        try:
            record = json.loads(line)
            payload = record["payload"]
            if payload.get("type") != WEIGHTS_LOADED:
                return line
        except (ValueError, KeyError, TypeError, AttributeError):
            return line
        payload["node_base_url"] = payload.get("base_url")
        payload["base_url"] = url
        payload["openai_base_url"] = url + "/v1"
        return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode()

    return rewrite

"""The node protocol's one home: the agent's channel names, its record types, the parsers
the app reads its records with, and the node's environment (every variable the engine sets
for the node, declared once: `AgentEnv`, `RoleEnv`, `SwitchEnv`, below).

The node agent (mvp_tui/node/) writes frame lines (see datastream/frame_line.py) on
these channels; the engine (engine/node_watch.py, engine/cluster.py, engine/watchdog.py),
the Docker provider and the dashboard's panes (widgets/bootstrap_model.py, widgets/prompt.py)
read them. Everything here is standard library only.

The agent (the package `mvp_tui/node/`) imports this module: it ships to a node in the
agent's zipapp (`mvp_tui/agent_bundle.py`) with the few other standard-library-only modules it
shares with the app, so there is one copy of every name and of the frame line's wire form.
tests/foundation/test_node_protocol.py fails when any other module types an
`"mvp.node.`/`"mvp.worker.` name or a record type's name itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

WEIGHTS_CHANNEL = "mvp.worker.weights"  # the node's verdict: WeightsLoaded | WorkerFatal | ...
NODE_CHANNEL_PREFIX = "mvp.node."
AGENT_CHANNEL_SUFFIX = ".agent"  # mvp.node.<N>.agent: phases, progress, notices
ENGINE_CHANNEL_SUFFIX = ".engine"  # mvp.node.<N>.engine: the engine's log, one line a frame

NODE_AGENT_PHASE = "NodeAgentPhase"
NODE_AGENT_PROGRESS = "NodeAgentProgress"
NODE_AGENT_NOTICE = "NodeAgentNotice"
WEIGHTS_LOADED = "WeightsLoaded"
WORKER_FATAL = "WorkerFatal"
RPC_SERVER_READY = "RpcServerReady"  # a multi-node worker's RPC server listens
# What llama-server's own load log says it put on the GPUs ("offloaded N/M layers to GPU",
# one "model buffer size" line per device) against what it was asked; on the agent channel,
# once the engine is healthy and before its verdict (`offload_report` reads it).
ENGINE_OFFLOAD = "EngineOffload"

WATCHDOG_PHASE = "watchdog"  # the dead-man's switch's NodeAgentPhase / NodeAgentProgress

# The boot guard (armed by the instance's own start command, before any agent exists) and the
# agent meet in one directory on the node: the guard writes its verdict there, the agent
# reads it and stands the guard down with the marker file. SwitchEnv.boot_guard_dir moves it.
BOOT_GUARD_PHASE = "boot_guard"  # the agent's NodeAgentPhase reporting the guard's verdict
BOOT_GUARD_DIR = "/run/mvp-boot-guard"  # off /workspace: a network volume outlives a pod
BOOT_GUARD_VERDICT_FILE = "verdict"  # one line: armed <tool> <secs> | off | failed <why>
BOOT_GUARD_STAND_DOWN_FILE = "attached"  # written by the agent: the guard never fires

# The model prefetch (the instance's start command, before any agent exists) leaves the
# bytes in the cache file's `.part` and one line `<pid> <unix start> <tool>` beside it; the
# agent stops it and adopts the file. It runs only when the create env holds SwitchEnv.prefetch.
PREFETCH_STATE_SUFFIX = ".prefetch"


def agent_channel(node_id: int) -> str:
    """`mvp.node.<N>.agent`."""
    return f"{NODE_CHANNEL_PREFIX}{node_id}{AGENT_CHANNEL_SUFFIX}"


def engine_channel(node_id: int) -> str:
    """`mvp.node.<N>.engine`."""
    return f"{NODE_CHANNEL_PREFIX}{node_id}{ENGINE_CHANNEL_SUFFIX}"


FRAME_VERSION = 1


def frame_line(channel: str, payload: Any) -> str:
    """One frame line (no newline), the canonical form: compact, ASCII-only, keys in the
    order mvp_frame, channel, payload (the channel is not checked here: see
    `mvp_tui.datastream.frame_line.encode_frame_line`)."""
    record = {"mvp_frame": FRAME_VERSION, "channel": channel, "payload": payload}
    return json.dumps(record, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def is_agent_channel(channel: str) -> bool:
    """Whether `channel` is some node's `mvp.node.<N>.agent`."""
    return channel.startswith(NODE_CHANNEL_PREFIX) and channel.endswith(AGENT_CHANNEL_SUFFIX)


def parse_record(payload: bytes | str) -> dict[str, Any]:
    """A frame's payload as the agent's record (a JSON object); `{}` for anything else."""
    try:
        value = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def record_type(record: dict[str, Any]) -> str | None:
    """The record's `type` (one of the names above), or None."""
    kind = record.get("type")
    return kind if isinstance(kind, str) else None


def int_field(record: dict[str, Any], name: str) -> int | None:
    """An integer field (not a bool), or None when absent or of another type."""
    value = record.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


OFFLOAD_ASKED = ("all", "fit")  # -ngl 999 (the fit says it fits) | --fit on (it may not)


@dataclass(frozen=True)
class OffloadReport:
    """An `EngineOffload` record, checked: the layers on the GPUs of all, each device's model
    buffer (MiB, in the log's order), what was asked, and why the node refused it ("" when
    it did not; `allowed` when [model] allow_partial_offload let a shortfall through)."""

    layers: int
    total: int
    buffers_mib: tuple[tuple[str, float], ...]
    asked: str
    problem: str = ""
    allowed: bool = False

    @property
    def ok(self) -> bool:
        return not self.problem

    def summary(self) -> str:
        """`33/33 layers · CUDA0 4,403 MiB` (host buffers left out: they hold what stays)."""
        gpus = [(name, mib) for name, mib in self.buffers_mib if is_gpu_buffer(name)]
        shown = " · ".join(f"{name} {mib:,.0f} MiB" for name, mib in gpus) or "no GPU buffer"
        return f"{self.layers}/{self.total} layers · {shown}"


def is_gpu_buffer(device: str) -> bool:
    """Whether a `model buffer size` line's device is a GPU (CUDA0, Vulkan0, ROCm0, Metal):
    not the host's memory (CPU, CPU_Mapped, CPU_REPACK, CUDA_Host pinned memory) and not a
    multi-node run's RPC endpoint (`host:port`)."""
    return not (device.upper().startswith("CPU") or device.endswith("_Host") or ":" in device)


def offload_report(record: dict[str, Any]) -> OffloadReport | None:
    """The `EngineOffload` record's facts, or None when it is not one or is malformed."""
    if record_type(record) != ENGINE_OFFLOAD:
        return None
    layers, total = int_field(record, "layers"), int_field(record, "layers_total")
    asked, raw = record.get("asked"), record.get("buffers_mib")
    if layers is None or total is None or asked not in OFFLOAD_ASKED or not isinstance(raw, dict):
        return None
    buffers = tuple(
        (str(name)[:40], float(mib))
        for name, mib in raw.items()
        if isinstance(mib, (int, float)) and not isinstance(mib, bool)  # a tuple: 3.8 nodes
    )
    problem = record.get("problem")
    return OffloadReport(
        layers, total, buffers, str(asked), problem if isinstance(problem, str) else "",
        record.get("allowed") is True,
    )


# The engine's web UI, opened by the dashboard through the node's gate (mvp_tui/node/gate.py).
# It is served on a name of its own, `<label>.localhost` (browsers resolve every *.localhost
# to loopback themselves), so its cookie reaches no other loopback service: a cookie made on
# 127.0.0.1 would ride to every port of 127.0.0.1. The label is derived from the run's key, so
# the dashboard and the gate agree on it without a word, and it is no key itself. The
# dashboard logs the browser in with a one-time code (never the key): HMAC(key, nonce, expiry),
# spent once by the gate and refused after its expiry.
WEBUI_LOGIN_PATH = "/mvp/webui"  # POST code=… here: the UI's cookie, then on to /
WEBUI_CODE_TTL_S = 300  # a login page is good this long (the node's clock decides)
WEBUI_LABEL_CHARS = 20  # hex digits of the host label: 80 bits nobody can guess


def _mac(key: str, *parts: str) -> str:
    import hashlib
    import hmac

    return hmac.new(key.encode(), "\n".join(parts).encode(), hashlib.sha256).hexdigest()


def webui_host(key: str) -> str:
    """The web UI's host name for the run with this key: `<label>.localhost`."""
    return f"mvp-{_mac(key, 'mvp-webui-host')[:WEBUI_LABEL_CHARS]}.localhost"


def webui_login_code(key: str, now: float, nonce: str = "") -> str:
    """A one-time login code, `<nonce>.<expiry>.<mac>`, good for WEBUI_CODE_TTL_S."""
    import secrets

    nonce = nonce or secrets.token_hex(16)
    expiry = str(int(now) + WEBUI_CODE_TTL_S)
    return f"{nonce}.{expiry}.{_mac(key, 'mvp-webui-login', nonce, expiry)}"


def webui_code_valid(key: str, code: str, now: float) -> tuple[str, str]:
    """The code's nonce, and "" when it is good now, else why not (its spending is the
    gate's: it keeps the nonces it has taken)."""
    import hmac

    nonce, _, rest = code.partition(".")
    expiry, _, mac = rest.partition(".")
    if not (nonce.isalnum() and expiry.isdigit() and len(mac) == 64):
        return "", "not a login code"
    if not hmac.compare_digest(mac.encode(), _mac(key, "mvp-webui-login", nonce, expiry).encode()):
        return "", "not this run's login code"
    if int(expiry) < now:
        return nonce, "the login code expired (open the web UI again from the dashboard: `w`)"
    return nonce, ""


def webui_cookie_value(key: str, host: str, expiry: int) -> str:
    """The web UI's cookie: good on `host` until `expiry` (unix seconds), the key's MAC."""
    return f"{expiry}.{_mac(key, 'mvp-webui-cookie', host, str(expiry))}"


# ---------------------------------------------------------------------------------------
# The node's environment: every variable the engine sets for the node (the agent, its
# roles, its dead-man's switch, the boot guard and the model prefetch), each declared once
# with its name, parser and default. The engine builds these and writes `to_env()`; the
# agent reads `from_env(os.environ)`. tests/foundation/test_node_env.py fails when another
# module of mvp_tui spells one of these names itself.

DEFAULT_HF_ENDPOINT = "https://huggingface.co"
DEFAULT_VASTAI_API_URL = "https://console.vast.ai"
DEFAULT_RUNPOD_API_URL = "https://api.runpod.io/v2"  # REST v1 was retired on 2026-11-15
DEFAULT_PROVIDER_ENV_FILE = "/proc/1/environ"

# The image a rented node runs by default, and its CUDA floor, declared together: llama.cpp's
# CUDA image pinned to the build llama-cpp-python 0.3.36 (uv.lock) vendors, b11312 (commit
# 0c1e570: its CHANGELOG; `llama-server --version` of scripts/llama-rpc-build.sh's build), so
# the engine's flags and log lines change only when the pin moves. That commit's
# docs/docker.md builds the CUDA 12 images with CUDA_VERSION 12.8.1: a host whose driver
# supports CUDA < 12.8 cannot start it. Moving the pin: docs/providers/index.md#moving-the-pin.
LLAMA_CPP_PYTHON = "0.3.36"  # uv.lock's pin the build is read from (a test holds the two)
LLAMA_CPP_BUILD = "b11312"
RENTED_IMAGE = f"ghcr.io/ggml-org/llama.cpp:full-cuda-{LLAMA_CPP_BUILD}"
RENTED_IMAGE_CUDA_MIN = "12.8"
ENGINE_BIND_HOSTS = ("127.0.0.1", "0.0.0.0")  # loopback, or every interface (a Docker bridge)
NODE_ROLES = ("single", "main", "worker")


class NodeEnvError(Exception):
    """A node env value that cannot be used: names the variable, the value and the fix."""

    def __init__(self, message: str, name: str = "") -> None:
        super().__init__(message)
        self.name = name


def _text(raw: str) -> str:
    return raw.strip()


def _verbatim(raw: str) -> str:  # key material: its own line breaks and spaces stay
    return raw


def _lower(raw: str) -> str:
    return raw.strip().lower()


# ---------------------------------------------------------------------------------------
# Base URLs a secret is sent to (a marketplace key, the instance key, HF_TOKEN). One strict
# shape, so that every parser on the way (httpx in the app, urllib on the node, curl in the
# boot guard) reads the same host: scheme, host, optional port and path; nothing else.

# userinfo, query, fragment, and the backslash that parsers disagree on
_URL_REFUSED_CHARS = "@?#\\"


def is_loopback_name(host: str) -> bool:
    """Whether `host` (a parsed host name: an IP address, bracketed IPv6 allowed, or
    localhost) is loopback."""
    import ipaddress

    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(url: str) -> str | None:
    """The host name urllib reads from `url` (lower case), or None when it reads none."""
    import urllib.parse

    try:
        host = urllib.parse.urlsplit(url.strip()).hostname
    except ValueError:
        return None
    return host or None


def base_url_problem(url: str, *, plain_http_ok: bool) -> str | None:
    """Why `url` cannot be a base URL that carries a secret, or None. Userinfo, a query or a
    fragment is refused outright (`http://evil.example?@127.0.0.1` is evil.example to every
    client); plain http only to a loopback host unless `plain_http_ok`, decided on the
    parsed host name, never on the text."""
    import urllib.parse

    text = url.strip()
    if any(ord(c) <= 32 or ord(c) >= 127 for c in text):
        return "holds spaces, control or non-ASCII characters"
    first = next((c for c in text if c in _URL_REFUSED_CHARS), None)  # what parsers see first
    if first is not None:
        what = {"@": "user info (an '@')", "?": "a query (a '?')", "#": "a fragment (a '#')"}
        return (f"holds {what.get(first, 'a backslash')}: a base URL is scheme, host, port "
                "and path only")
    try:
        parts = urllib.parse.urlsplit(text)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        return "does not parse as a URL"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL with a host"
    if scheme == "http" and not plain_http_ok and not is_loopback_name(parts.hostname):
        return "is plain http to a host that is not loopback"
    return None


def shown_url(url: str) -> str:
    """`url` safe to print: user info, a query and a fragment (where secrets hide) masked."""
    import urllib.parse

    text = "".join(c if 32 < ord(c) < 127 else "?" for c in url.strip())[:200]
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        cut = min((i for i in (text.find(c) for c in _URL_REFUSED_CHARS) if i >= 0),
                  default=len(text))
        return text[:cut] + ("…" if cut < len(text) else "")
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "…@" + netloc.rpartition("@")[2]
    shown = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else text.split("?")[0]
    shown += "?…" if parts.query or text.endswith("?") else ""
    shown += "#…" if parts.fragment or text.endswith("#") else ""
    return shown


class UrlRefused(ValueError):
    """A URL value refused; `shown` is the value as an error may print it."""

    def __init__(self, why: str, raw: str) -> None:
        super().__init__(why)
        self.shown = shown_url(raw)


def _url(raw: str) -> str:
    """A base URL (the hub's; plain http stays the agent's call, with or without HF_TOKEN)."""
    problem = base_url_problem(raw, plain_http_ok=True)
    if problem:
        raise UrlRefused(problem, raw)
    return raw.strip().rstrip("/")


def _key_url(raw: str) -> str:
    """A base URL the instance key is sent to: https, or http to loopback only."""
    problem = base_url_problem(raw, plain_http_ok=False)
    if problem:
        raise UrlRefused(problem, raw)
    scheme, sep, rest = raw.strip().rstrip("/").partition("://")
    return scheme.lower() + sep + rest  # the boot guard's sh matches lower case only


def _csv(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _flag(raw: str) -> bool:
    word = raw.strip().lower()
    if word in ("1", "true"):
        return True
    if word in ("0", "false"):
        return False
    raise ValueError("is not a flag")


def _integer(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError("is not an integer") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"is out of range [{low}, {high}]")
        return value

    return parse


def _number(raw: str) -> float:
    """A finite number ≥ 0."""
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError("is not a number") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise ValueError("is not a number ≥ 0")
    return value


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError(f"is not one of {', '.join(options)}")
        return value

    return parse


def _env(
    name: str, parse: Callable[[str], Any], default: Any, fix: str, *, passthrough: bool = False
) -> Any:
    """One variable: `passthrough` ones the engine copies from its own environment when set
    (tests and images point them elsewhere); the others it sets from the config."""
    return field(
        default=default,
        metadata={"env": name, "parse": parse, "fix": fix, "passthrough": passthrough},
    )


def _formatted(value: Any) -> str:
    if value is None:  # unset: read back as the default
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


class _EnvGroup:
    """What every group below shares: read from an environment, written as one."""

    @classmethod
    def from_env(cls: type[_G], env: Mapping[str, str]) -> _G:
        """The group from `env`; an unset or blank variable is its default. A bad value
        raises NodeEnvError naming the variable, the value and the fix."""
        values: dict[str, Any] = {}
        for item in fields(cls):  # type: ignore[arg-type]
            meta = item.metadata
            raw = env.get(meta["env"])
            if raw is None or not raw.strip():
                continue
            try:
                values[item.name] = meta["parse"](raw)
            except ValueError as exc:
                shown = raw if len(raw) <= 60 else raw[:60] + "…"
                if isinstance(exc, UrlRefused):
                    shown = exc.shown
                raise NodeEnvError(
                    f"{meta['env']}={shown!r} {exc}; fix: {meta['fix']}", meta["env"]
                ) from None
        return cls(**values)

    def to_env(self, always: tuple[str, ...] = ()) -> dict[str, str]:
        """Every variable whose value is not its default (the node reads those as unset), and
        the fields named in `always` whatever their value."""
        env: dict[str, str] = {}
        for item in fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            if value != item.default or item.name in always:
                env[item.metadata["env"]] = _formatted(value)
        return env

    @classmethod
    def env_name(cls, name: str) -> str:
        """The variable that carries field `name`."""
        for item in fields(cls):  # type: ignore[arg-type]
            if item.name == name:
                return str(item.metadata["env"])
        raise KeyError(name)

    @classmethod
    def env_names(cls) -> tuple[str, ...]:
        return tuple(str(item.metadata["env"]) for item in fields(cls))  # type: ignore[arg-type]

    @classmethod
    def passthrough_names(cls) -> tuple[str, ...]:
        return tuple(
            str(item.metadata["env"])
            for item in fields(cls)  # type: ignore[arg-type]
            if item.metadata["passthrough"]
        )


_G = TypeVar("_G", bound=_EnvGroup)

_SECONDS = "set seconds, e.g. 30"


@dataclass(frozen=True)
class AgentEnv(_EnvGroup):
    """The agent's own settings (mvp_tui/node/settings.py derives the rest from these)."""

    run_id: str = _env("MVP_RUN_ID", _text, "", "let the dashboard set the run id")
    node_id: int = _env("MVP_LOGICAL_NODE_ID", _integer(0), 0, "set a node number, e.g. 0")
    stage_index: int = _env("MVP_STAGE_INDEX", _integer(0), 0, "set a stage number, e.g. 0")
    layer_end_exclusive: int = _env(
        "MVP_LAYER_END_EXCLUSIVE", _integer(0), 0, "set a layer number, e.g. 32"
    )
    # The Python that runs the agent (run.sh and the Docker launcher read it).
    node_python: str = _env("MVP_NODE_PYTHON", _text, "python3", "name a python3 on the node")
    model_id: str = _env("MVP_MODEL_ID", _text, "", "set [model] id")
    gguf_local_path: str = _env("MVP_GGUF_LOCAL_PATH", _text, "", "set a .gguf file's path")
    gguf_repo: str = _env("MVP_GGUF_REPO", _text, "", "set a hub repo, e.g. org/model-GGUF")
    gguf_file: str = _env("MVP_GGUF_FILE", _text, "", "name the .gguf file inside the repo")
    gguf_revision: str = _env("MVP_GGUF_REVISION", _text, "main", "set a branch or commit")
    tokenizer_local_path: str = _env(
        "MVP_TOKENIZER_LOCAL_PATH", _text, "", "set a tokenizer file's path"
    )
    hf_endpoint: str = _env(
        "MVP_HF_ENDPOINT", _url, DEFAULT_HF_ENDPOINT, "set the hub's https URL", passthrough=True
    )
    # Empty: ~/.cache/mvp-node on the node.
    model_cache_dir: str = _env(
        "MVP_MODEL_CACHE_DIR", _text, "", "set a writable directory", passthrough=True
    )
    # Where the digests the node verified are kept, off the model cache (which may be a volume
    # other pods write): empty, ~/.cache/mvp-node-verified on the node.
    verified_dir: str = _env(
        "MVP_MODEL_VERIFIED_DIR", _text, "", "set a node-local directory", passthrough=True
    )
    engine_port: int = _env("MVP_ENGINE_PORT", _integer(0, 65535), 0, "set a port, or unset it")
    # True: engine_port is a preference; taken, the gate serves on a free port instead.
    engine_port_fallback: bool = _env(
        "MVP_ENGINE_PORT_FALLBACK", _flag, False, "set 1 (or unset it)"
    )
    engine_host: str = _env(
        "MVP_ENGINE_HOST", _choice(*ENGINE_BIND_HOSTS), ENGINE_BIND_HOSTS[0],
        "leave it unset (loopback)",
    )
    max_context: int = _env("MVP_MAX_CONTEXT", _integer(0), 0, "set a whole number ≥ 0")
    # The fit's VRAM need per node (MiB; model_fit.ModelNeed): a GPU node with at least this
    # much gets every layer (-ngl), one with less, or an unknown need (0), `--fit on`.
    vram_need_mib: int = _env("MVP_VRAM_NEED_MIB", _integer(0), 0, "set MiB, or unset it")
    # One slot's KV cache per node at the context (MiB; the fit's): unset [model] parallel,
    # the node adds slots while its memory holds them past the need (mvp_tui/node/slots.py).
    kv_slot_mib: int = _env("MVP_KV_SLOT_MIB", _integer(0), 0, "set MiB, or unset it")
    # [model] parallel: llama-server's slots (-np); 0: as many as fit, at most 4.
    parallel: int = _env("MVP_PARALLEL", _integer(0, 64), 0, "set [model] parallel (1-64)")
    # [model] allow_partial_offload: fewer layers on the GPU than asked is a warning, not
    # the host's failure.
    allow_partial_offload: bool = _env(
        "MVP_ALLOW_PARTIAL_OFFLOAD", _flag, False, "set [model] allow_partial_offload"
    )
    engine_threads: int = _env("MVP_ENGINE_THREADS", _integer(0), 0, "set a whole number ≥ 0")
    engine_cmd: str = _env("MVP_ENGINE_CMD", _text, "", "set the engine's command line")
    engine_kind: str = _env("MVP_ENGINE_KIND", _text, "", "leave it unset")
    # The run's key for the engine's endpoint (a *KEY* name: redacted); empty: no key.
    api_key: str = _env("MVP_API_KEY", _text, "", "let the dashboard set the run's key")
    gate_max_body: int = _env(
        "MVP_GATE_MAX_BODY_BYTES", _integer(1), 64 << 20, "set a byte count ≥ 1"
    )
    ready_timeout_s: float = _env("MVP_ENGINE_READY_TIMEOUT_S", _number, 600.0, _SECONDS)
    stop_timeout_s: float = _env("MVP_ENGINE_STOP_TIMEOUT_S", _number, 10.0, _SECONDS)
    # Seconds between readiness probes when the engine's log gives no hint; 0: 20 ms growing
    # to 250 ms.
    health_poll_s: float = _env("MVP_ENGINE_POLL_S", _number, 0.0, _SECONDS)
    download_retries: int = _env("MVP_DOWNLOAD_RETRIES", _integer(0), 5, "set a count ≥ 0")
    download_retry_delay_s: float = _env("MVP_DOWNLOAD_RETRY_DELAY_S", _number, 1.0, _SECONDS)
    # A download slower than the floor (Mbit/s) over a whole window is the host's fault.
    download_floor_mbps: float = _env(
        "MVP_DOWNLOAD_FLOOR_MBPS", _number, 0.0, "set Mbit/s, e.g. 100"
    )
    download_floor_window_s: float = _env("MVP_DOWNLOAD_FLOOR_WINDOW_S", _number, 90.0, _SECONDS)
    control_fifo: str = _env("MVP_CONTROL_FIFO", _text, "", "set a fifo's path")
    stdin_eof_shutdown: bool = _env("MVP_STDIN_EOF_SHUTDOWN", _flag, False, "set 1 or unset it")
    # Read by the engine builds that know them (the seed's node spec passes them on).
    token_progress_every: str = _env(
        "MVP_TOKEN_PROGRESS_EVERY", _text, "", "set a count", passthrough=True
    )
    cpu_line_profile: str = _env("MVP_CPU_LINE_PROFILE", _text, "", "set 1", passthrough=True)
    cpu_line_profile_interval_ms: str = _env(
        "MVP_CPU_LINE_PROFILE_INTERVAL_MS", _text, "", "set milliseconds", passthrough=True
    )


@dataclass(frozen=True)
class RoleEnv(_EnvGroup):
    """A multi-node run's role (llama.cpp's RPC backend); unset on a single node."""

    role: str = _env("MVP_NODE_ROLE", _choice(*NODE_ROLES), NODE_ROLES[0], "main, worker or unset")
    # Where the node finds llama.cpp's RPC binaries (tests point it at their build).
    rpc_bin_dir: str = _env(
        "MVP_RPC_BIN_DIR", _text, "", "set llama.cpp's bin directory", passthrough=True
    )
    rpc_port: int = _env("MVP_RPC_PORT", _integer(0, 65535), 0, "set a port, or unset it")
    rpc_servers: tuple[str, ...] = _env(
        "MVP_RPC_SERVERS", _csv, (), "host:port of each worker, comma-separated"
    )
    rpc_nodes: tuple[str, ...] = _env("MVP_RPC_NODES", _csv, (), "one node id per server")
    tensor_split: str = _env(
        "MVP_TENSOR_SPLIT", _text, "", "comma-separated numbers, e.g. 3,1"
    )
    gpu_layers: int = _env("MVP_GPU_LAYERS", _integer(0), 99, "set a layer count ≥ 0")
    # Rented nodes: the worker authorizes the run's tunnel key for its RPC port only; the
    # main node reaches each worker through `ssh -L` with the private half.
    tunnel_pubkey: str = _env("MVP_RPC_TUNNEL_PUBKEY", _text, "", "let the dashboard set it")
    # Empty: ~/.ssh/authorized_keys (tests point it at their sshd's).
    authorized_file: str = _env(
        "MVP_RPC_AUTHORIZED_FILE", _text, "", "set a writable file", passthrough=True
    )
    tunnels: tuple[str, ...] = _env(
        "MVP_RPC_TUNNELS", _csv, (), "let the dashboard start the main node"
    )
    tunnel_key: str = _env("MVP_RPC_TUNNEL_KEY", _verbatim, "", "let the dashboard set it")
    known_hosts: str = _env("MVP_RPC_KNOWN_HOSTS", _verbatim, "", "let the dashboard set it")


@dataclass(frozen=True)
class SwitchEnv(_EnvGroup):
    """The dead-man's switch's inputs (mvp_tui/node/switch.py), and the boot guard's and the
    prefetch's, which run from the instance's start command before any agent."""

    watchdog_provider: str = _env(
        "MVP_WATCHDOG_PROVIDER", _lower, "", "vastai, runpod, local or docker"
    )
    node_provider: str = _env("MVP_NODE_PROVIDER", _lower, "", "vastai, runpod, local or docker")
    max_hours: float = _env("MVP_MAX_HOURS", _number, 0.0, "set hours, e.g. 0.5")
    idle_teardown_mins: float = _env(
        "MVP_IDLE_TEARDOWN_MINS", _number, 0.0, "set minutes, e.g. 20"
    )
    # The idle stop: no request reached the engine (through the gate) for this long.
    idle_stop_mins: float = _env("MVP_IDLE_STOP_MINS", _number, 0.0, "set minutes, e.g. 30")
    lease_started_at: float = _env("MVP_LEASE_STARTED_AT", _number, 0.0, "set unix seconds")
    # The first retry pause when the provider's API does not answer (tests shorten it).
    retry_initial_s: float = _env(
        "MVP_WATCHDOG_RETRY_INITIAL_S", _number, 1.0, _SECONDS, passthrough=True
    )
    vastai_api_url: str = _env(
        "MVP_VASTAI_API_URL", _key_url, DEFAULT_VASTAI_API_URL, "set [vastai] api_url"
    )
    runpod_api_url: str = _env(
        "MVP_RUNPOD_API_URL", _key_url, DEFAULT_RUNPOD_API_URL, "set [runpod] api_url"
    )
    # Where the instance's own credentials are when not in the agent's environment.
    provider_env_file: str = _env(
        "MVP_NODE_PROVIDER_ENV_FILE", _text, DEFAULT_PROVIDER_ENV_FILE, "set a readable file",
        passthrough=True,
    )
    # Where the boot guard and the agent meet on the node (tests move it under a tmp dir).
    boot_guard_dir: str = _env(
        "MVP_BOOT_GUARD_DIR", _text, BOOT_GUARD_DIR, "set a writable directory", passthrough=True
    )
    # The boot guard's grace in whole seconds (providers/boot_guard.py; 0: off, unset: its
    # default).
    boot_grace_s: int | None = _env("MVP_BOOT_GRACE_S", _integer(0), None, "set whole seconds")
    # The start command fetches a hub model before any agent (providers/prefetch.py).
    prefetch: bool = _env("MVP_PREFETCH", _flag, False, "set 1 or unset it")

    def api_url(self, provider: str) -> str:
        """The API URL of `provider`'s node switch: its `<name>_api_url` ("" for none)."""
        return str(getattr(self, api_url_field(provider), "") or "")


@dataclass(frozen=True)
class BootEnv(_EnvGroup):
    """What the instance's start command and the Docker launcher read before any agent runs:
    shell and a few lines of Python written by providers/runpod/boot.py, vastai/host_key.py and
    docker/spec.py. Their defaults stay in those scripts (a blank here is "unset" there)."""

    # RunPod: the pod's pinned sshd host key (private, OpenSSH, base64; a *KEY* name:
    # redacted). Vast: the same cut into pieces named with this and _1, _2, ….
    host_key: str = _env("MVP_SSH_HOST_KEY_ED25519", _verbatim, "", "let the dashboard set it")
    # The key's install tells the rest of the boot how it went: empty, unfilled or failed.
    key_problem: str = _env("MVP_BOOT_KEY_PROBLEM", _text, "", "leave it unset")
    # Where the boot writes the host key and finds sshd (tests point them at a loopback sshd).
    ssh_dir: str = _env("MVP_BOOT_SSH_DIR", _text, "", "set sshd's directory, e.g. /etc/ssh")
    sshd_pidfile: str = _env("MVP_BOOT_SSHD_PIDFILE", _text, "", "set sshd's pid file")
    sshd_config: str = _env("MVP_BOOT_SSHD_CONFIG", _text, "", "set sshd's config file")
    # The boot guard's first pause between destroy tries, doubling (tests shorten it).
    guard_retry_s: int = _env("MVP_BOOT_GUARD_RETRY_S", _integer(1), 3, "set whole seconds ≥ 1")
    # Docker: the node's copy of [docker] gpus (the seed's node spec carries it), and the
    # lengths of the agent and of its secrets, which follow on the container's stdin.
    docker_gpus: str = _env("MVP_DOCKER_GPUS", _text, "", "set [docker] gpus")
    agent_bytes: int = _env("MVP_AGENT_BYTES", _integer(0), 0, "let the dashboard set it")
    stdin_env_bytes: int = _env(
        "MVP_STDIN_ENV_BYTES", _integer(0), 0, "let the dashboard set it"
    )
    # Where scripts/llama-rpc-build.sh caches llama.cpp's RPC build (empty: ~/.cache/mvp-tui).
    llama_cache: str = _env("MVP_LLAMA_CACHE", _text, "", "set the build cache's directory")


NODE_ENV_GROUPS: tuple[type[_EnvGroup], ...] = (AgentEnv, RoleEnv, SwitchEnv, BootEnv)
# The names the start command's shell scripts (providers/boot_guard.py, providers/prefetch.py)
# are written with.
BOOT_GUARD_DIR_ENV = SwitchEnv.env_name("boot_guard_dir")
BOOT_GRACE_ENV = SwitchEnv.env_name("boot_grace_s")
PREFETCH_ENV = SwitchEnv.env_name("prefetch")


def api_url_field(provider: str) -> str:
    """The `SwitchEnv` field of a provider's API URL: `<name>_api_url`, declared above for each
    provider whose node destroys itself through its API (providers/<name>/node_api.py)."""
    return f"{provider}_api_url"


def api_url_env(provider: str) -> str:
    """The variable that gives the node its provider's API URL ("" for a provider with none)."""
    field = api_url_field(provider)
    return SwitchEnv.env_name(field) if field in SwitchEnv.__dataclass_fields__ else ""


def api_url_fields(provider: str, url: str | None) -> dict[str, Any]:
    """`SwitchEnv` keyword arguments that give `provider`'s switch `url` (none when unset, or
    the provider's node has no API)."""
    field = api_url_field(provider)
    return {field: url} if url and field in SwitchEnv.__dataclass_fields__ else {}


def passed_through(environ: Mapping[str, str]) -> dict[str, str]:
    """The passthrough variables set in `environ` (the engine's own), as they are."""
    names = [name for group in NODE_ENV_GROUPS for name in group.passthrough_names()]
    return {name: environ[name] for name in names if environ.get(name)}

"""mvp-node: the node agent. It fetches the model, serves it with llama.cpp, and reports.

One file, standard library only, Python 3.9+ syntax: the dashboard copies this file to a
leased node over SFTP and runs it with the node's own `python3` (the local provider runs it
as a child process). Configuration comes from the environment (the seed's `MVP_*` keys).

Everything it reports goes to stdout as frame lines, one JSON object per line:
    {"mvp_frame": 1, "channel": "<name>", "payload": <JSON value>}
Nothing else is ever written to stdout; diagnostics go to stderr. Channels:
- `mvp.node.<N>.agent` (N = MVP_LOGICAL_NODE_ID): `NodeAgentPhase` records, each phase
  `started` then `ready` | `failed` with `elapsed_ms` and a detail; `NodeAgentProgress`
  records for downloads and engine loading; `NodeAgentNotice` for odd input.
- `mvp.worker.weights`: one `WeightsLoaded` record when the engine answers, or `WorkerFatal`
  (reason, fix, exit code, last engine log lines) when the node cannot serve.
- `mvp.node.<N>.engine`: the engine's log, one frame per line, control characters and
  escape sequences removed, length bounded.

Phases: config, watchdog (the dead-man's switch's verdict, below; only when configured),
probe (environment and GPUs), model (local file or Hugging Face download, resumable),
engine_start, engine_health (503 "loading" is progress), watch (until shutdown or the engine
dies), shutdown. `shutdown` on stdin, SIGTERM/SIGINT, or a line `shutdown` written to the
control fifo (MVP_CONTROL_FIFO) stops the engine and exits 0.
Exit codes: 0 stopped on request (or by the switch), 1 the node failed (WorkerFatal),
2 bad configuration.

Values of HF_TOKEN and of any environment variable whose name holds KEY, TOKEN, SECRET or
PASSWORD never appear in anything it prints, and are not passed on to the engine; nor does
the instance key the switch reads from the provider's env file.

The dead-man's switch bounds the node's bill when no dashboard does. Inputs (all optional):
MVP_WATCHDOG_PROVIDER (else MVP_NODE_PROVIDER): vastai | runpod | local | docker;
MVP_LEASE_STARTED_AT (unix s) and MVP_MAX_HOURS (fractional: 0.01 = 36 s) give the
deadline; MVP_IDLE_TEARDOWN_MINS the silence limit; MVP_VASTAI_API_URL /
MVP_RUNPOD_API_URL the API base; MVP_NODE_PROVIDER_ENV_FILE (default /proc/1/environ) where
the instance's own credentials are read when the agent's environment lacks them (an agent
started over SSH does not see PID 1's environment): CONTAINER_ID + CONTAINER_API_KEY on
Vast, RUNPOD_POD_ID + RUNPOD_API_KEY on RunPod. Never the account key.
- Verdict, right after config: a `watchdog` phase `ready` {provider, instance_id,
  deadline_at, idle_teardown_mins, armed, ...} once a harmless authenticated read of the
  instance's own record worked (Vast: GET /api/v0/instances/{id}/; RunPod: GET /pods/{id}),
  or `failed` with a one-line `reason` naming the fix. A failed verdict does not stop the
  agent: the dashboard decides ([limits] require_node_watchdog).
- Control lines (stdin or the control fifo): `heartbeat` resets the silence timer, `detach`
  disarms the silence switch (the deadline stays), `attach` re-arms it (and counts as a
  heartbeat). The silence timer starts when the agent starts.
- Firing (deadline passed, or silence while armed): a `watchdog` phase `started` {trigger:
  deadline | idle}, the engine stops cleanly, then on vastai/runpod the agent DELETEs its own
  instance with back-off (capped at 30 s) until the instance-scoped GET says it is gone, and
  writes `watchdog` `ready` {destroyed: true, trigger}; it never gives up (each failure is a
  notice). On local/docker nodes the engine and the agent end instead (`ready` {destroyed:
  false, ended: true}); exit code 0 either way. MVP_WATCHDOG_RETRY_INITIAL_S (default 1)
  is the first retry pause, for tests.
The switch lives in this process: a fatal node error that ends the agent ends it too.

The gate (MVP_API_KEY, the run's key; or MVP_IDLE_STOP_MINS > 0): the engine listens on a
private loopback port and the agent serves the engine's port itself, passing on only requests
with `Authorization: Bearer <key>` (else 401) for a loopback Host (else 403), streamed as they
come; POST /mvp/webui with the key gives the engine's web UI a cookie. llama-server also gets
the key as LLAMA_API_KEY. WeightsLoaded then says `auth: "key"` and the gate's port.
Idle stop (MVP_IDLE_STOP_MINS): every POST through the gate, or a `use` control line, counts
as use; with none for the window (counted from when the engine serves) the switch fires with
trigger `idle_stop` (a `detach` leaves it armed). NodeAgentProgress `watchdog` records say
`idle_stop_armed`, `idle_stop_warning` {stops_in_s} and `idle_stop_postponed`.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import importlib.util
import json
import os
import platform
import queue
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    # HTTP (http.client pulls in email and ssl: ~20 ms) loads when first used: a download,
    # a readiness probe, a provider call; not at the agent's start, nor in the dashboard,
    # which imports this file for the local node.
    import urllib.error
    import urllib.request

FRAME_VERSION = 1
GGUF_MAGIC = b"GGUF"
ENGINE_HOST = "127.0.0.1"  # where the agent reaches its engine, and binds it by default
# ggml-rpc-server's bind, whatever MVP_ENGINE_HOST says: ggml RPC has no authentication and
# gives a client the process's memory, so a worker is reached only through the run's tunnel.
RPC_HOST = "127.0.0.1"
# MVP_ENGINE_HOST: loopback, or every interface where a published port must reach the engine
# (a Docker bridge container's eth0).
ENGINE_BIND_HOSTS = ("127.0.0.1", "0.0.0.0")
ENGINE_LINE_MAX = 2000
LAST_LINES_KEPT = 20
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
MIN_SECRET_LEN = 6
DEFAULT_HF_ENDPOINT = "https://huggingface.co"
DOWNLOAD_CHUNK = 1 << 20
PROGRESS_EVERY_S = 0.5

EXIT_OK = 0
EXIT_FATAL = 1
EXIT_CONFIG = 2

LOCAL_PATH_KEY = "[model] gguf_local_path (MVP_GGUF_LOCAL_PATH)"

# --- node protocol: begin (copied verbatim into node_agent.py; a test checks) ---
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

WATCHDOG_PHASE = "watchdog"  # the dead-man's switch's NodeAgentPhase / NodeAgentProgress

# The boot guard (armed by the instance's own start command, before any agent exists) and the
# agent meet in one directory on the node: the guard writes its verdict there, the agent
# reads it and stands the guard down with the marker file. Env MVP_BOOT_GUARD_DIR moves it.
BOOT_GUARD_PHASE = "boot_guard"  # the agent's NodeAgentPhase reporting the guard's verdict
BOOT_GUARD_DIR_ENV = "MVP_BOOT_GUARD_DIR"
BOOT_GUARD_DIR = "/run/mvp-boot-guard"  # off /workspace: a network volume outlives a pod
BOOT_GUARD_VERDICT_FILE = "verdict"  # one line: armed <tool> <secs> | off | failed <why>
BOOT_GUARD_STAND_DOWN_FILE = "attached"  # written by the agent: the guard never fires


def agent_channel(node_id: int) -> str:
    """`mvp.node.<N>.agent`."""
    return f"{NODE_CHANNEL_PREFIX}{node_id}{AGENT_CHANNEL_SUFFIX}"


def engine_channel(node_id: int) -> str:
    """`mvp.node.<N>.engine`."""
    return f"{NODE_CHANNEL_PREFIX}{node_id}{ENGINE_CHANNEL_SUFFIX}"


# --- node protocol: end ---

# Terminal escape sequences and control characters (the rules of mvp_tui/untrusted.py,
# copied because this file must stand alone on the node).
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[@-Z\\-_]"
    r"|\x1b.?",
    re.DOTALL,
)
_CONTROLS = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f\x80-\x9f"
    "\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)


def clean_text(
    text: str, max_chars: int = ENGINE_LINE_MAX, *, redact: Callable[[str], str] | None = None
) -> str:
    """Untrusted text made safe to forward: no escapes or controls, secrets redacted (with
    `redact`), then bounded length — in that order, so a cut never shows a secret's prefix."""
    text = _CONTROLS.sub("", _ESCAPES.sub("", text))
    if redact is not None:
        text = redact(text)
    if len(text) > max_chars:
        text = f"{text[:max_chars]} … [cut {len(text) - max_chars} chars]"
    return text


# ---------------------------------------------------------------------------------------
# Secrets and output


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values that must never be printed: HF_TOKEN and every *KEY*/*TOKEN*/*SECRET*."""
    found = []
    for name, value in env.items():
        upper = name.upper()
        if any(part in upper for part in SECRET_NAME_PARTS) and len(value) >= MIN_SECRET_LEN:
            found.append(value)
    return sorted(set(found), key=len, reverse=True)


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


class Redactor:
    """Replaces known secret values with `<redacted>` in text and in JSON values."""

    def __init__(self, secrets: list[str]) -> None:
        # The app's floor too (mvp_tui/secrets.py): a very short value would hide ordinary words.
        kept = {s for s in secrets if len(s) >= MIN_SECRET_LEN}
        self._secrets = sorted(kept, key=len, reverse=True)

    def add(self, secret: str) -> None:
        """One more value to hide (read after start, e.g. an instance key from a file)."""
        if len(secret) >= MIN_SECRET_LEN and secret not in self._secrets:
            # A new list, swapped in whole: other threads keep iterating the old one.
            self._secrets = sorted({*self._secrets, secret}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "<redacted>")
        return text

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value


def frame_line(channel: str, payload: Any) -> str:
    """One frame line (no newline), canonical as mvp_tui.datastream.frame_line writes it:
    compact, ASCII-only, keys in the order mvp_frame, channel, payload."""
    record = {"mvp_frame": FRAME_VERSION, "channel": channel, "payload": payload}
    return json.dumps(record, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


class Emitter:
    """Writes frames to stdout, one whole line at a time from any thread, secrets removed."""

    def __init__(self, out_fd: int, redactor: Redactor, run_id: str, node_id: int) -> None:
        self._out_fd = out_fd
        self._redact = redactor
        self._lock = threading.Lock()
        self._broken = False
        self.run_id = run_id
        self.node_id = node_id

    @property
    def agent_channel(self) -> str:
        return agent_channel(self.node_id)

    @property
    def engine_channel(self) -> str:
        return engine_channel(self.node_id)

    def frame(self, channel: str, payload: Any) -> None:
        line = self._redact.text(frame_line(channel, self._redact.value(payload))) + "\n"
        data = line.encode("utf-8", "replace")
        with self._lock:
            if self._broken:
                return
            try:
                # Raw writes, no Python buffer: a daemon thread can never hold a buffer
                # lock at interpreter exit (which aborts the process).
                while data:
                    data = data[os.write(self._out_fd, data) :]
            except OSError:
                # Nobody reads any more (the dashboard went away): keep serving, stop writing.
                self._broken = True

    def _record(self, kind: str, **fields: Any) -> dict[str, Any]:
        record: dict[str, Any] = {"type": kind, "run_id": self.run_id, "node_id": self.node_id}
        record.update(fields)
        record["at"] = round(time.time(), 3)
        return record

    def phase(
        self, phase: str, status: str, detail: dict[str, Any], elapsed_ms: int | None = None
    ) -> None:
        record = self._record(NODE_AGENT_PHASE, phase=phase, status=status, detail=detail)
        if elapsed_ms is not None:
            record["elapsed_ms"] = elapsed_ms
        self.frame(self.agent_channel, record)

    def progress(self, phase: str, **fields: Any) -> None:
        self.frame(self.agent_channel, self._record(NODE_AGENT_PROGRESS, phase=phase, **fields))

    def notice(self, message: str) -> None:
        self.frame(self.agent_channel, self._record(NODE_AGENT_NOTICE, message=message))

    def weights(self, kind: str, **fields: Any) -> None:
        self.frame(WEIGHTS_CHANNEL, self._record(kind, **fields))

    def engine_line(self, text: str) -> None:
        self.frame(self.engine_channel, text)

    def redact(self, text: str) -> str:
        """`text` with the node's secrets replaced (for text cut before it is emitted)."""
        return self._redact.text(text)

    def stderr(self, text: str) -> None:
        """A diagnostic for humans reading the node's stderr log (never a frame)."""
        try:
            sys.stderr.write(self._redact.text(text) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


# ---------------------------------------------------------------------------------------
# Settings


class ConfigError(Exception):
    """A setting the agent cannot use; names the key and the fix."""


class Settings:
    """Everything the agent reads from its environment, parsed once."""

    def __init__(self, env: Mapping[str, str]) -> None:
        # The dashboard's run id ("r-7f3a09c1"); opaque here, only echoed in records.
        self.run_id = clean_text(env.get("MVP_RUN_ID", "").strip(), 64)
        self.node_id = _env_int(env, "MVP_LOGICAL_NODE_ID", 0)
        self.model_id = env.get("MVP_MODEL_ID", "").strip()
        self.gguf_local_path = env.get("MVP_GGUF_LOCAL_PATH", "").strip()
        self.gguf_repo = env.get("MVP_GGUF_REPO", "").strip()
        self.gguf_file = env.get("MVP_GGUF_FILE", "").strip()
        self.gguf_revision = env.get("MVP_GGUF_REVISION", "").strip() or "main"
        self.hf_endpoint = (env.get("MVP_HF_ENDPOINT", "").strip() or DEFAULT_HF_ENDPOINT).rstrip(
            "/"
        )
        self.hf_token = env.get("HF_TOKEN", "") or env.get("HUGGING_FACE_HUB_TOKEN", "")
        cache = env.get("MVP_MODEL_CACHE_DIR", "").strip()
        self.cache_dir = Path(cache).expanduser() if cache else Path.home() / ".cache/mvp-node"
        self.engine_port = _env_int(env, "MVP_ENGINE_PORT", 0, low=0, high=65535)
        self.engine_host = env.get("MVP_ENGINE_HOST", "").strip() or ENGINE_HOST
        if self.engine_host not in ENGINE_BIND_HOSTS:
            raise ConfigError(
                f"MVP_ENGINE_HOST={self.engine_host!r} is not one of "
                f"{', '.join(ENGINE_BIND_HOSTS)}; fix: leave it unset (loopback)"
            )
        self.max_context = _env_int(env, "MVP_MAX_CONTEXT", 0, low=0)
        self.engine_threads = _env_int(env, "MVP_ENGINE_THREADS", 0, low=0)
        self.engine_cmd = env.get("MVP_ENGINE_CMD", "").strip()
        self.engine_kind = env.get("MVP_ENGINE_KIND", "").strip()
        # The run's key for the engine's endpoint (a *KEY* name: redacted, and kept from the
        # engine's environment but for LLAMA_API_KEY, set on purpose); empty: no key.
        self.api_key = env.get("MVP_API_KEY", "").strip()
        self.ready_timeout_s = _env_float(env, "MVP_ENGINE_READY_TIMEOUT_S", 600.0)
        self.stop_timeout_s = _env_float(env, "MVP_ENGINE_STOP_TIMEOUT_S", 10.0)
        # Seconds between readiness probes when the engine's log gives no hint; 0: 20 ms
        # growing to 250 ms.
        self.health_poll_s = _env_float(env, "MVP_ENGINE_POLL_S", 0.0)
        self.download_retries = _env_int(env, "MVP_DOWNLOAD_RETRIES", 5, low=0)
        self.download_retry_delay_s = _env_float(env, "MVP_DOWNLOAD_RETRY_DELAY_S", 1.0)
        # A download slower than the floor (Mbit/s) over a whole window is the host's fault.
        self.download_floor_mbps = _env_float(env, "MVP_DOWNLOAD_FLOOR_MBPS", 0.0)
        self.download_floor_window_s = _env_float(env, "MVP_DOWNLOAD_FLOOR_WINDOW_S", 90.0)
        self.control_fifo = env.get("MVP_CONTROL_FIFO", "").strip()
        self.stdin_eof_shutdown = env.get("MVP_STDIN_EOF_SHUTDOWN", "").strip() in {"1", "true"}
        if self.gguf_repo and not self.gguf_file:
            raise ConfigError(
                "[model] gguf_repo (MVP_GGUF_REPO) is set but [model] gguf_file "
                "(MVP_GGUF_FILE) is empty; fix: name the .gguf file inside the repo"
            )

    def summary(self, env: Mapping[str, str]) -> dict[str, Any]:
        """What the config phase reports: sources and knobs, never a value of a secret."""
        source = "local" if self.gguf_local_path else ("hub" if self.gguf_repo else None)
        return {
            "model_id": self.model_id,
            "model_source": source,
            "engine_port": self.engine_port,
            "max_context": self.max_context,
            "engine_cmd": bool(self.engine_cmd),
            "control_fifo": self.control_fifo or None,
            "env_keys": sorted(k for k in env if k.startswith("MVP_")),
            "hf_token": bool(self.hf_token),
            "api_key": bool(self.api_key),
        }


def _env_int(
    env: Mapping[str, str], key: str, default: int, low: int | None = None, high: int | None = None
) -> int:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer; fix: set a whole number") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise ConfigError(f"{key}={value} is out of range [{low}, {high}]")
    return value


def _env_float(env: Mapping[str, str], key: str, default: float) -> float:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a number; fix: set seconds, e.g. 30") from None
    if value < 0:
        raise ConfigError(f"{key}={raw} must not be negative")
    return value


# ---------------------------------------------------------------------------------------
# Control: shutdown requests and engine exits, from threads and signal handlers


class Control:
    """The agent's inbox. Signal handlers only assign a flag and use a SimpleQueue (both
    safe there); waiting on the queue is how phases pause without missing a shutdown."""

    STOP = "stop"
    ENGINE_EXIT = "engine_exit"
    NUDGE = "nudge"  # the engine said something that may mean ready: probe now

    def __init__(self) -> None:
        self._events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.stop_source: str | None = None

    @property
    def stop_requested(self) -> bool:
        return self.stop_source is not None

    def request_stop(self, source: str) -> None:
        if self.stop_source is None:
            self.stop_source = source
        self._events.put((self.STOP, source))

    def engine_exited(self, code: int | None) -> None:
        self._events.put((self.ENGINE_EXIT, code))

    def nudge(self) -> None:
        self._events.put((self.NUDGE, None))

    def wait(self, timeout: float | None) -> tuple[str, Any] | None:
        """The next event, or None after `timeout` seconds."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None


class Interrupted(Exception):
    """A shutdown request arrived while a phase was still running."""


SCOPE_HOST = "host"  # this machine failed: another host may well serve (the run goes on)
SCOPE_RUN = "run"  # the image, the model or the config: every host would fail the same way


class PhaseFailed(Exception):
    """A phase cannot complete; carries what the WorkerFatal record says. `scope` tells the
    run whether another host could do better (a config failure never can)."""

    def __init__(
        self,
        reason: str,
        fix: str = "",
        exit_code: int = EXIT_FATAL,
        detail: dict[str, Any] | None = None,
        scope: str = "",
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix
        self.exit_code = exit_code
        self.detail = detail or {}
        self.scope = scope or (SCOPE_RUN if exit_code == EXIT_CONFIG else SCOPE_HOST)


def read_commands(
    fd: int,
    source: str,
    control: Control,
    emitter: Emitter,
    eof_means_shutdown: bool = False,
    watchdog: Watchdog | None = None,
) -> None:
    """Thread body: command lines from stdin or the control fifo (held open read-write, so
    writers coming and going never produce EOF). Raw reads: no Python buffer lock that a
    daemon thread could hold at exit. EOF means shutdown only when asked (our parent's end
    of a pipe closed); a detached agent has /dev/null as stdin."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            raw, pending = pending.split(b"\n", 1)
            _handle_command(raw, source, control, emitter, watchdog)
    if eof_means_shutdown:
        control.request_stop(source + " closed")


def _handle_command(
    raw: bytes, source: str, control: Control, emitter: Emitter, watchdog: Watchdog | None = None
) -> None:
    command = raw.decode("utf-8", "replace").strip()
    if not command:
        return
    word = command.lower()
    if word == "shutdown":
        control.request_stop(source)
    elif word in WATCHDOG_WORDS:
        if watchdog is not None:
            watchdog.command(word, source)
    else:
        emitter.notice(f"ignored unknown command on {source}: {clean_text(command, 80)}")


def open_control_fifo(path: str) -> tuple[int, bool]:
    """Open (creating when absent) the control fifo; returns (fd, created)."""
    created = False
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISFIFO(mode):
            raise ConfigError(
                f"MVP_CONTROL_FIFO={path} exists and is not a fifo; fix: remove it or pick another "
                "path"
            )
    except FileNotFoundError:
        os.mkfifo(path, 0o600)
        created = True
    return os.open(path, os.O_RDWR), created


# ---------------------------------------------------------------------------------------
# Probe


def parse_nvidia_smi(text: str) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader`."""
    gpus = []
    for line in text.splitlines():
        if "," not in line:
            continue
        name, memory = line.rsplit(",", 1)
        digits = re.sub(r"[^0-9]", "", memory)
        gpus.append(
            {"name": clean_text(name.strip(), 120), "memory_mib": int(digits) if digits else 0}
        )
    return gpus


def probe_gpus() -> tuple[list[dict[str, Any]], str | None]:
    """GPUs from nvidia-smi when it is installed; an error text when it fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return [], None
    try:
        done = subprocess.run(
            [exe, "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi failed: {exc}"
    if done.returncode != 0:
        err = clean_text(done.stderr.decode("utf-8", "replace"), 200)
        return [], f"nvidia-smi exited {done.returncode}: {err}"
    return parse_nvidia_smi(done.stdout.decode("utf-8", "replace")), None


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
            return clean_text(value.strip(), 120)
    return platform.processor() or platform.machine()


def ram_mib(meminfo: str | None = None) -> int:
    """Total RAM in MiB from /proc/meminfo (0 when unknown)."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            meminfo = ""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            digits = re.sub(r"[^0-9]", "", line)
            return int(digits) // 1024 if digits else 0
    return 0


def probe_environment(settings: Settings, *, serves: bool = True) -> dict[str, Any]:
    """The node as the agent finds it; `lacks` names what this image misses for the job
    (`serves`: this node runs the serving engine, not only an RPC worker)."""
    cache_dir = settings.cache_dir
    gpus, gpu_error = probe_gpus()
    detail: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count() or 0,
        "ram_mib": ram_mib(),
        "gpus": gpus,
        "llama_server": find_llama_server(),
        "llama_cpp_python": importlib.util.find_spec("llama_cpp") is not None,
        "lacks": image_lacks(settings, gpus, serves=serves),
    }
    if gpu_error:
        detail["gpu_probe_error"] = gpu_error
    existing = cache_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    with contextlib.suppress(OSError):
        detail["disk_free_mib"] = shutil.disk_usage(str(existing)).free // (1 << 20)
    return detail


# ---------------------------------------------------------------------------------------
# Model


def gguf_problem(path: Path) -> str | None:
    """Why `path` is not a usable GGUF file, or None when it is."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except FileNotFoundError:
        return "file does not exist"
    except IsADirectoryError:
        return "is a directory, not a .gguf file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if head != GGUF_MAGIC:
        return "is not a GGUF file (it does not start with the GGUF magic bytes)"
    return None


class DownloadError(Exception):
    """A download attempt failed; `permanent` ones are not retried. `stalled`: the host's
    link stayed under the rate floor (permanent here, yet another host may do better)."""

    def __init__(self, message: str, permanent: bool = False, stalled: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent or stalled
        self.stalled = stalled


def _drop_auth_on_cross_host_redirect() -> urllib.request.HTTPRedirectHandler:
    """A handler that follows redirects but never sends the hub token to another host (the
    CDN); made on first use, as urllib.request loads then."""
    import urllib.request

    class DropAuthOnCrossHostRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self,
            req: urllib.request.Request,
            fp: IO[bytes],
            code: int,
            msg: str,
            headers: Any,
            newurl: str,
        ) -> urllib.request.Request | None:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            old_host = urllib.parse.urlsplit(req.full_url).netloc
            if new is not None and urllib.parse.urlsplit(newurl).netloc != old_host:
                new.remove_header("Authorization")
            return new

    return DropAuthOnCrossHostRedirect()


def model_cache_path(settings: Settings) -> Path:
    """Where a hub file lands: <cache>/<owner>--<repo>/<revision>/<file>."""
    parts = [p for p in settings.gguf_file.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise ConfigError(
            f"[model] gguf_file (MVP_GGUF_FILE)={settings.gguf_file!r} is not a file path "
            "inside the repo"
        )
    repo_dir = settings.gguf_repo.replace("/", "--")
    revision_dir = settings.gguf_revision.replace("/", "--")
    return settings.cache_dir.joinpath(repo_dir, revision_dir, *parts)


def hub_url(settings: Settings) -> str:
    repo = urllib.parse.quote(settings.gguf_repo, safe="/")
    revision = urllib.parse.quote(settings.gguf_revision, safe="")
    file = urllib.parse.quote(settings.gguf_file, safe="/")
    return f"{settings.hf_endpoint}/{repo}/resolve/{revision}/{file}"


class Downloader:
    """Fetches one hub file into `<dest>.part` with Range resumes, then renames it."""

    def __init__(self, settings: Settings, emitter: Emitter, control: Control) -> None:
        self.settings = settings
        self.emitter = emitter
        self.control = control
        import urllib.request

        self.opener = urllib.request.build_opener(_drop_auth_on_cross_host_redirect())

    def fetch(self, url: str, dest: Path) -> dict[str, Any]:
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        attempts = self.settings.download_retries + 1
        resumed_at: list[int] = []
        for attempt in range(1, attempts + 1):
            if part.exists() and part.stat().st_size:
                resumed_at.append(part.stat().st_size)
            try:
                total = self._attempt(url, part)
                break
            except DownloadError as exc:
                if exc.permanent or attempt == attempts:
                    raise
                self.emitter.progress(
                    "model", state="retrying", attempt=attempt, error=str(exc), url=url
                )
                delay = self.settings.download_retry_delay_s * (2 ** (attempt - 1))
                self._pause(min(delay, 30.0))
        problem = gguf_problem(part)
        if problem:
            part.unlink()
            raise DownloadError(f"downloaded file {problem}", permanent=True)
        os.replace(str(part), str(dest))
        return {"bytes": total, "attempts": attempt, "resumed_at": resumed_at}

    def _pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.control.stop_requested:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.control.wait(left)
        raise Interrupted()

    def _request(self, url: str, offset: int) -> urllib.request.Request:
        import urllib.request

        request = urllib.request.Request(url, headers={"User-Agent": "mvp-node/1"})
        if self.settings.hf_token:
            request.add_header("Authorization", f"Bearer {self.settings.hf_token}")
        if offset:
            request.add_header("Range", f"bytes={offset}-")
        return request

    def _attempt(self, url: str, part: Path) -> int:
        import urllib.error

        offset = part.stat().st_size if part.exists() else 0
        try:
            response = self.opener.open(self._request(url, offset), timeout=30)
        except urllib.error.HTTPError as exc:
            return self._http_error(exc, part, offset)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DownloadError(f"cannot reach {url}: {reason}") from None
        with response:
            status = response.status
            if offset and status == 200:
                offset = 0  # the server ignored Range: start over
            total = _content_total(response.headers, offset)
            if status == 206 and _content_start(response.headers) != offset:
                offset = 0
                part.unlink()
                raise DownloadError("server resumed at the wrong offset; restarting")
            return self._copy(response, part, offset, total)

    def _copy(self, response: IO[bytes], part: Path, offset: int, total: int | None) -> int:
        import http.client

        done = offset
        started = time.monotonic()
        window_start, window_done = started, offset  # the floor's window: start, bytes then
        last_report = 0.0
        self.emitter.progress("model", state="downloading", bytes_done=done, bytes_total=total)
        with part.open("ab" if offset else "wb") as out:
            while True:
                if self.control.stop_requested:
                    raise Interrupted()
                try:
                    chunk = response.read(DOWNLOAD_CHUNK)
                except (OSError, ValueError, http.client.HTTPException) as exc:
                    raise DownloadError(f"transfer broke at {done} bytes: {exc}") from None
                if not chunk:
                    break
                out.write(chunk)
                done += len(chunk)
                now = time.monotonic()
                if self._floor_window_passed(now, window_start, done - window_done):
                    window_start, window_done = now, done
                if now - last_report >= PROGRESS_EVERY_S:
                    last_report = now
                    rate = (done - offset) / max(now - started, 1e-6)
                    self.emitter.progress(
                        "model",
                        state="downloading",
                        bytes_done=done,
                        bytes_total=total,
                        rate_bps=int(rate),
                    )
        if total is not None and done != total:
            raise DownloadError(f"connection closed at {done} of {total} bytes")
        self.emitter.progress("model", state="downloaded", bytes_done=done, bytes_total=total)
        return done

    def _floor_window_passed(self, now: float, since: float, moved: int) -> bool:
        """True once a whole window passed at or above the floor (a new one starts);
        raises a stalled DownloadError when a whole window moved less."""
        floor, window = self.settings.download_floor_mbps, self.settings.download_floor_window_s
        if floor <= 0 or now - since < window:
            return False
        mbps = moved * 8 / 1e6 / (now - since)
        if mbps < floor:
            raise DownloadError(
                f"download stalled: {mbps:.2f} Mbit/s over {now - since:.0f} s, under the "
                f"floor of {floor:g} Mbit/s ([model] download_floor_mbps)",
                stalled=True,
            )
        return True

    def _http_error(self, exc: urllib.error.HTTPError, part: Path, offset: int) -> int:
        code = exc.code
        if code == 416 and offset:
            total = _content_total(exc.headers, 0)
            if total == offset:
                return offset  # the .part file is already complete
            part.unlink()
            raise DownloadError(f"HTTP 416 for a resume at {offset}; restarting")
        if code in (401, 403):
            hint = "set HF_TOKEN to a token that can read this repo"
            if self.settings.hf_token:
                hint = "the HF_TOKEN given cannot read this repo (gated or private)"
            raise DownloadError(f"access denied (HTTP {code}): {hint}", permanent=True)
        if code == 404:
            raise DownloadError(
                "not found (HTTP 404): check [model] gguf_repo / gguf_file / gguf_revision",
                permanent=True,
            )
        raise DownloadError(f"HTTP {code} from the hub", permanent=code < 500 and code != 429)


def _content_start(headers: Any) -> int | None:
    match = re.match(r"bytes (\d+)-", headers.get("Content-Range", "") or "")
    return int(match.group(1)) if match else None


def _content_total(headers: Any, offset: int) -> int | None:
    content_range = headers.get("Content-Range", "") or ""
    match = re.search(r"/(\d+)\s*$", content_range)
    if match:
        return int(match.group(1))
    length = headers.get("Content-Length")
    if length and str(length).isdigit():
        return offset + int(length)
    return None


# ---------------------------------------------------------------------------------------
# Engine


class EngineSpec:
    """How to start the engine and how to tell it is ready."""

    def __init__(
        self,
        kind: str,
        argv: list[str],
        ready_path: str,
        port: int,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.argv = argv
        self.ready_path = ready_path
        self.port = port
        self.env = dict(env or {})  # added to the agent's environment for the engine

    @property
    def base_url(self) -> str:
        return f"http://{ENGINE_HOST}:{self.port}"


def pick_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ENGINE_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def engine_spec(settings: Settings, model: Path, alias: str) -> EngineSpec:
    """The engine command: MVP_ENGINE_CMD, else llama-server on PATH, else llama_cpp.server."""
    port = settings.engine_port or pick_free_port()
    ctx = settings.max_context
    threads = settings.engine_threads
    if settings.engine_cmd:
        values = {
            "{model}": str(model),
            "{host}": settings.engine_host,
            "{port}": str(port),
            "{ctx}": str(ctx),
            "{alias}": alias,
            "{python}": sys.executable,
        }
        argv = []
        for arg in shlex.split(settings.engine_cmd):
            for key, value in values.items():
                arg = arg.replace(key, value)
            argv.append(arg)
        kind = settings.engine_kind or (
            "llama-server" if os.path.basename(argv[0]) == "llama-server" else "custom"
        )
        ready = "/health" if kind == "llama-server" else "/v1/models"
        return EngineSpec(kind, argv, ready, port)
    server = find_llama_server()
    if server:
        host = settings.engine_host
        argv = [server, "-m", str(model), "--host", host, "--port", str(port), "-a", alias]
        argv += ["-c", str(ctx)] if ctx else []
        argv += ["-t", str(threads)] if threads else []
        return EngineSpec("llama-server", argv, "/health", port, env=_beside_libs(server))
    if importlib.util.find_spec("llama_cpp") is not None:
        argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
        argv += ["--host", settings.engine_host, "--port", str(port)]
        argv += ["--interrupt_requests", "False"]
        argv += ["--model_alias", alias]
        argv += ["--n_ctx", str(ctx)] if ctx else []
        argv += ["--n_threads", str(threads)] if threads else []
        return EngineSpec("llama-cpp-python", argv, "/v1/models", port)
    raise no_engine()


def no_engine() -> PhaseFailed:
    return PhaseFailed(
        "this image lacks a serving engine: llama-server is neither on PATH nor at "
        f"{', '.join(KNOWN_LLAMA_SERVERS)}, and the llama_cpp package is not installed for "
        f"{sys.executable}",
        fix=f"use an image that holds llama.cpp's server (the default for rented nodes is "
        f"{RENTED_IMAGE_HINT}), install it (pip install 'llama-cpp-python[server]'), or set "
        "MVP_ENGINE_CMD",
        scope=SCOPE_RUN,
    )


# What llama.cpp (and llama-cpp-python) print when the model file itself cannot be read; a
# load that fails for memory (too small a GPU) is the host's, not the file's.
_MODEL_UNREADABLE = ("error loading model", "failed to load model", "gguf_init_from_file",
                     "invalid magic", "failed to read magic")  # fmt: skip
_MEMORY_WORDS = ("alloc", "out of memory", "cuda", "vram")


def model_unreadable(lines: list[str]) -> bool:
    """The engine's last lines say the model file is unreadable (not a memory failure)."""
    text = "\n".join(lines).lower()
    return any(m in text for m in _MODEL_UNREADABLE) and not any(
        w in text for w in _MEMORY_WORDS
    )


# llama.cpp's own images (the "full" and "server" targets) keep llama-server in /app, off PATH.
KNOWN_LLAMA_SERVERS = ("/app/llama-server",)
RENTED_IMAGE_HINT = "ghcr.io/ggml-org/llama.cpp:full-cuda"


def find_llama_server() -> str | None:
    """llama-server on PATH, else where llama.cpp's images keep it."""
    found = shutil.which("llama-server")
    if found:
        return found
    return next((p for p in KNOWN_LLAMA_SERVERS if os.access(p, os.X_OK)), None)


def _beside_libs(server: str) -> dict[str, str]:
    """llama.cpp's images copy its shared libraries next to the binaries (in /app), which
    is on no loader path; a server found off PATH gets that directory on LD_LIBRARY_PATH."""
    if shutil.which("llama-server") == server:
        return {}
    here = os.path.dirname(server)
    before = os.environ.get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": here + (os.pathsep + before if before else "")}


def cuda_runtime_missing(gpus: list[dict[str, Any]]) -> bool:
    """GPUs are visible but no CUDA runtime library is: a CUDA engine would fall back to
    the CPU (llama.cpp loads its CUDA backend only when libcudart and libcublas load)."""
    if not gpus:
        return False
    try:
        done = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, timeout=10, check=False, text=True
        )
    except (OSError, subprocess.TimeoutExpired):
        return False  # cannot tell: say nothing rather than something wrong
    return done.returncode == 0 and "libcudart.so" not in done.stdout


LACKS_ENGINE = "engine (llama-server or the llama_cpp package)"


def has_engine(settings: Settings) -> bool:
    if settings.engine_cmd or find_llama_server() is not None:
        return True
    return importlib.util.find_spec("llama_cpp") is not None


def image_lacks(
    settings: Settings, gpus: list[dict[str, Any]], *, serves: bool = True
) -> list[str]:
    """What this image lacks for the agent's job, named for the first record."""
    lacks: list[str] = []
    if serves and not has_engine(settings):
        lacks.append(LACKS_ENGINE)
    if cuda_runtime_missing(gpus):
        lacks.append("CUDA runtime (libcudart): the engine would run on the CPU")
    return lacks


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec hook that makes the engine die with the agent (Linux prctl), resolved
    before fork so the child only makes one libc call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    return hook


class Engine:
    """The running engine process, its log forwarder and its exit watcher."""

    # Python ignores SIGPIPE and Popen resets it in the child; a role may keep it ignored.
    restore_signals = True

    def __init__(self, spec: EngineSpec, emitter: Emitter, control: Control) -> None:
        self.spec = spec
        self.emitter = emitter
        self.control = control
        self.last_lines: collections.deque[str] = collections.deque(maxlen=LAST_LINES_KEPT)
        self.stopping = False
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_thread: threading.Thread | None = None
        self.on_line: Callable[[str], None] | None = None  # sees every cleaned log line

    def start(self, env: Mapping[str, str], cwd: Path) -> int:
        try:
            self.proc = subprocess.Popen(
                self.spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**env, **self.spec.env},
                cwd=str(cwd),
                preexec_fn=_die_with_parent_hook(),
                restore_signals=self.restore_signals,
            )
        except OSError as exc:
            raise PhaseFailed(
                f"cannot start the engine {self.spec.argv[0]}: {exc.strerror or exc}",
                fix="check MVP_ENGINE_CMD or the engine installation",
                scope=SCOPE_RUN,
            ) from None
        self._log_thread = threading.Thread(target=self._forward_log, daemon=True)
        self._log_thread.start()
        threading.Thread(target=self._watch_exit, daemon=True).start()
        return self.proc.pid

    def _forward_log(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            text = clean_text(line, redact=self.emitter.redact)  # redacted before it is cut
            self.last_lines.append(text)
            if self.on_line is not None:
                self.on_line(text)
            self.emitter.engine_line(text)
            if READY_HINT.search(text):
                self.control.nudge()  # the health loop probes at once instead of next poll

    def _watch_exit(self) -> None:
        assert self.proc is not None
        code = self.proc.wait()
        if not self.stopping:
            self.control.engine_exited(code)

    def flush_log(self, timeout: float = 2.0) -> None:
        """Wait until the engine's last log lines have been forwarded."""
        if self._log_thread is not None:
            self._log_thread.join(timeout)

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout: float) -> dict[str, Any]:
        """Terminate, wait, kill: the engine is gone when this returns."""
        self.stopping = True
        if self.proc is None:
            return {"engine": "not started"}
        killed = False
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                killed = True
        self.flush_log()
        return {"engine_exit_code": self.proc.returncode, "killed": killed}


# Engine log lines after which readiness may have changed: uvicorn (llama-cpp-python) and
# llama-server announce their listening socket, llama-server then its loaded model.
READY_HINT = re.compile(
    r"Uvicorn running on|server is listening on|HTTP server listening|model loaded"
    r"|all slots are idle"
)
HEALTH_POLL_FIRST_S = 0.02  # the fallback poll, for engines that say none of that
HEALTH_POLL_MAX_S = 0.25


def probe_ready(url: str) -> tuple[str, int | None]:
    """One readiness probe: ("ready"|"loading"|"refused"|"http"|"error", status)."""
    import urllib.error
    import urllib.request

    # No proxy handler: the engine is on this node's loopback, where HTTP(S)_PROXY / ALL_PROXY
    # in the node's environment must not send the probe.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as response:
            response.read(65536)
            return ("ready" if response.status == 200 else "http"), response.status
    except urllib.error.HTTPError as exc:
        return ("loading" if exc.code == 503 else "http"), exc.code
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return "refused", None
        return "error", None
    except OSError:
        return "error", None


# ---------------------------------------------------------------------------------------
# The gate: the engine's public port. An HTTP proxy in front of the engine that admits only
# requests carrying the run's key and counts each use for the idle stop; the engine itself
# listens on a private loopback port.

GATE_HOSTS = ("127.0.0.1", "localhost", "::1")  # a Host header naming anything else is a
# DNS-rebinding page reaching the forwarded port: refused
WEBUI_LOGIN_PATH = "/mvp/webui"  # POST key=… here: a cookie for the engine's web UI, then /
WEBUI_COOKIE = "mvp_webui"
GATE_COPY_CHUNK = 65536
GATE_ENGINE_TIMEOUT_S = 600.0  # a model may think this long before its first token
_HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-authenticate",
                          "proxy-authorization", "te", "trailers", "transfer-encoding",
                          "upgrade", "content-length", "host"})  # fmt: skip


def webui_token(key: str) -> str:
    """The web UI's cookie value: derived from the key (a cookie store never holds the key)."""
    import hashlib
    import hmac

    return hmac.new(key.encode(), b"mvp-webui", hashlib.sha256).hexdigest()


def _loopback_host(header: str) -> bool:
    host = header.strip().lower()
    if host.startswith("["):
        if "]" not in host:
            return False
        host = host[1 : host.find("]")]
    else:
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return host in GATE_HOSTS


class Gate:
    """The engine's public port: admits a request only with `Authorization: Bearer <key>`
    (or the web UI's cookie, from a loopback page), only for a loopback Host, and tells
    `on_use` of every POST it passes on (a completion, a chat, an embedding: what the idle
    stop counts). No key (`key` empty): it admits every request, and still counts."""

    def __init__(
        self,
        host: str,
        port: int,
        engine_port: int,
        key: str,
        *,
        engine_key: str = "",
        on_use: Callable[[], None] | None = None,
    ) -> None:
        self.host, self.port, self.engine_port = host, port, engine_port
        self.key, self.engine_key = key, engine_key
        self.on_use = on_use
        self.uses = 0
        self._server: Any = None

    def admits(self, headers: Any) -> bool:
        import hmac

        if not self.key:
            return True
        auth = str(headers.get("Authorization") or "")
        if auth[:7].lower() == "bearer " and hmac.compare_digest(
            auth[7:].strip().encode(), self.key.encode()
        ):
            return True
        origin = str(headers.get("Origin") or "")
        if origin and not origin.lower().startswith(("http://127.0.0.1:", "http://localhost:")):
            return False  # a cookie rides only on the UI's own requests
        token = webui_token(self.key)
        for part in str(headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == WEBUI_COOKIE and hmac.compare_digest(value.encode(), token.encode()):
                return True
        return False

    def start(self) -> int:
        """Bind and serve on a thread; the bound port."""
        from http.server import ThreadingHTTPServer

        server = ThreadingHTTPServer((self.host, self.port), _gate_handler())
        server.daemon_threads = True
        server.gate = self  # type: ignore[attr-defined]
        self._server = server
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, name="gate", daemon=True).start()
        return self.port

    def used(self) -> None:
        self.uses += 1
        if self.on_use is not None:
            self.on_use()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _gate_handler() -> Any:
    """The gate's request handler class (http.server loads only when a gate opens)."""
    import http.client
    from http.server import BaseHTTPRequestHandler

    class GateHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # A stream is many small writes: Nagle's algorithm would hold each behind the
            # client's delayed ACK.
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # nothing of a request is logged: its headers hold the key

        def _refuse(self, status: int, message: str) -> None:
            body = json.dumps({"error": {"code": status, "message": message,
                                         "type": "authentication_error"}}).encode()  # fmt: skip
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if status == 401:
                self.send_header("WWW-Authenticate", 'Bearer realm="mvp-tui"')
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> bytes | None:
            if self.headers.get("Transfer-Encoding"):
                return None
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _login(self, gate: Gate) -> None:
            import hmac

            body = self._body() or b""
            fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            key = (fields.get("key") or [""])[0]
            if not gate.key or not hmac.compare_digest(key.encode(), gate.key.encode()):
                self._refuse(401, "wrong key for the web UI")
                return
            self.send_response(303)
            self.send_header("Location", "/")
            self.send_header("Set-Cookie", f"{WEBUI_COOKIE}={webui_token(gate.key)}; "
                             "HttpOnly; SameSite=Lax; Path=/")  # fmt: skip
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _handle(self) -> None:
            gate: Gate = self.server.gate  # type: ignore[attr-defined]
            if not _loopback_host(str(self.headers.get("Host") or "")):
                self._refuse(403, "this endpoint answers only to 127.0.0.1 or localhost")
                return
            if self.command == "POST" and self.path.split("?", 1)[0] == WEBUI_LOGIN_PATH:
                self._login(gate)
                return
            if not gate.admits(self.headers):
                self._refuse(401, "missing or wrong API key (Authorization: Bearer <key>; "
                             "`mvp-tui endpoint` prints it)")  # fmt: skip
                self.close_connection = self.headers.get("Content-Length") not in (None, "0")
                return
            body = self._body()
            if body is None:
                self._refuse(411, "send a Content-Length, not a chunked body")
                self.close_connection = True
                return
            if self.command == "POST":
                gate.used()
            self._forward(gate, body)

        def _forward(self, gate: Gate, body: bytes) -> None:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in _HOP_HEADERS and k.lower() not in
                       ("authorization", "cookie")}  # fmt: skip
            headers["Host"] = f"{ENGINE_HOST}:{gate.engine_port}"
            headers["Connection"] = "close"  # its body then ends with the connection
            if gate.engine_key:
                headers["Authorization"] = f"Bearer {gate.engine_key}"
            conn = http.client.HTTPConnection(
                ENGINE_HOST, gate.engine_port, timeout=GATE_ENGINE_TIMEOUT_S
            )
            try:
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
            except OSError:
                conn.close()
                self._refuse(502, "the engine does not answer")
                return
            try:
                self._relay(answer)
            except OSError:
                self.close_connection = True  # the client went away mid-stream
            finally:
                conn.close()

        def _relay(self, answer: Any) -> None:
            """The engine's answer, streamed on as it comes (an SSE stream chunk by chunk)."""
            self.send_response(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in _HOP_HEADERS:
                    self.send_header(name, value)
            length = answer.getheader("Content-Length")
            bodiless = self.command == "HEAD" or answer.status in (204, 304)
            if length is not None or bodiless:
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
                while not bodiless:
                    data = answer.read(GATE_COPY_CHUNK)
                    if not data:
                        break
                    self.wfile.write(data)
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if answer.chunked:
                # Passed on as the engine framed it, byte for byte, until it closes (asked
                # to): no parsing per chunk on the way.
                while data := answer.fp.read1(GATE_COPY_CHUNK):
                    self.wfile.write(data)
                return
            while data := answer.read1(GATE_COPY_CHUNK):  # to its end: framed here
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_HEAD = do_PATCH = _handle

    return GateHandler


# ---------------------------------------------------------------------------------------
# The dead-man's switch: deadline and silence, proven at start, destroying its own instance

WATCHDOG_WORDS = ("heartbeat", "detach", "attach", "use")
IDLE_STOP_WARN_S = 120.0  # the warning comes this long before an idle stop (or at 3/4 of
# a shorter window)
API_PROVIDERS = ("vastai", "runpod")
LOCAL_PROVIDERS = ("local", "docker")
DEFAULT_VASTAI_API_URL = "https://console.vast.ai"
DEFAULT_RUNPOD_API_URL = "https://api.runpod.io/v2"  # REST v1 was retired on 2026-11-15
DEFAULT_PROVIDER_ENV_FILE = "/proc/1/environ"
WATCHDOG_USER_AGENT = "mvp-node/1 (dead-man switch)"
WATCHDOG_HTTP_TIMEOUT_S = 10.0
WATCHDOG_RETRY_CAP_S = 30.0
WATCHDOG_WAIT_CAP_S = 30.0  # the timer thread looks again at least this often (clock jumps)
VERDICT_ATTEMPTS = 4
VAST_RATE_LIMIT_WAIT_S = 3.0  # Vast's 429s carry no Retry-After; its destroy threshold is 3.0
REQUIRE_HINT = "or set [limits] require_node_watchdog = false to rent without the node switch"
_CREDENTIAL_NAMES = {
    "vastai": ("CONTAINER_ID", "CONTAINER_API_KEY"),
    "runpod": ("RUNPOD_POD_ID", "RUNPOD_API_KEY"),
}
_MISSING_KEY_HINTS = {
    "vastai": "this image does not expose Vast's instance key; use a Vast image that does",
    "runpod": "this pod does not expose its pod-scoped key; use a RunPod template that does",
}


class WatchdogSettings:
    """The switch's inputs. Never raises: a bad value becomes `problem`, which the verdict
    reports as `failed` (the agent keeps serving; the dashboard decides)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.problem: str | None = None
        explicit = env.get("MVP_WATCHDOG_PROVIDER", "").strip().lower()
        provider = explicit or env.get("MVP_NODE_PROVIDER", "").strip().lower()
        self.max_hours = self._number(env, "MVP_MAX_HOURS", "hours, e.g. 0.5")
        self.idle_mins = self._number(env, "MVP_IDLE_TEARDOWN_MINS", "minutes, e.g. 20")
        # The idle stop: no request reached the engine (through the gate) for this long.
        self.idle_stop_mins = self._number(env, "MVP_IDLE_STOP_MINS", "minutes, e.g. 30")
        self.lease_started_at = self._number(env, "MVP_LEASE_STARTED_AT", "unix seconds")
        self.retry_initial_s = self._number(env, "MVP_WATCHDOG_RETRY_INITIAL_S", "seconds") or 1.0
        self.enabled = bool(provider) or self.max_hours > 0 or self.idle_mins > 0
        self.enabled = self.enabled or self.idle_stop_mins > 0
        self.enabled = self.enabled or self.problem is not None
        if self.enabled and not provider:
            provider = "local"
        if provider and provider not in API_PROVIDERS + LOCAL_PROVIDERS and not self.problem:
            name = "MVP_WATCHDOG_PROVIDER" if explicit else "MVP_NODE_PROVIDER"
            self.problem = (
                f"{name}={clean_text(provider, 40)!r} is not a provider the node switch knows; "
                "expected vastai, runpod, local or docker"
            )
        self.provider = provider
        if provider == "runpod":
            raw_url = env.get("MVP_RUNPOD_API_URL", "").strip() or DEFAULT_RUNPOD_API_URL
        else:
            raw_url = env.get("MVP_VASTAI_API_URL", "").strip() or DEFAULT_VASTAI_API_URL
        self.api_url = raw_url.rstrip("/")
        self.env_file = env.get("MVP_NODE_PROVIDER_ENV_FILE", "").strip()
        self.env_file = self.env_file or DEFAULT_PROVIDER_ENV_FILE

    def _number(self, env: Mapping[str, str], key: str, unit: str) -> float:
        raw = env.get(key, "").strip()
        if not raw:
            return 0.0
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if value != value or value in (float("inf"), float("-inf")) or value < 0:
            if self.problem is None:
                self.problem = (
                    f"{key}={clean_text(raw, 40)!r} is not a number ≥ 0 ({unit}); the node "
                    "switch cannot enforce it"
                )
            return 0.0
        return value


class Credentials:
    """The instance's own id and key (the key is secret: redacted, never printed)."""

    def __init__(self, provider: str, instance_id: str, key: str, source: str) -> None:
        self.provider = provider
        self.instance_id = instance_id
        self.key = key
        self.source = source


def read_env_file(path: str) -> tuple[dict[str, str], str | None]:
    """A NUL-separated environ file (like /proc/1/environ): (variables, why unreadable)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return {}, "not found"
    except OSError as exc:
        return {}, f"unreadable: {exc.strerror or exc}"
    found: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.decode("utf-8", "replace").partition("=")
        if sep and name:
            found[name.strip()] = value
    return found, None


def resolve_credentials(
    provider: str, env: Mapping[str, str], env_file: str
) -> tuple[Credentials | None, str]:
    """The instance's credentials from the agent's environment, else the env file; else
    (None, a one-line reason that names the variable and the fix)."""
    id_name, key_name = _CREDENTIAL_NAMES[provider]
    loaded: list[tuple[dict[str, str], str | None]] = []

    def from_file() -> dict[str, str]:
        if not loaded:
            loaded.append(read_env_file(env_file))
        return loaded[0][0]

    def lookup(name: str) -> tuple[str, str]:
        value = env.get(name, "").strip()
        if value:
            return value, "agent env"
        value = from_file().get(name, "").strip()
        return (value, env_file) if value else ("", "")

    key, key_source = lookup(key_name)
    instance_id, id_source = lookup(id_name)
    if not instance_id and provider == "vastai":
        label, id_source = lookup("VAST_CONTAINERLABEL")  # "C.<id>", as Vast's boot uses it
        instance_id = label[2:] if label.startswith("C.") else ""
    where = f"agent env, {env_file}"
    if loaded and loaded[0][1]:
        where += f" ({loaded[0][1]})"
    hint = f"{_MISSING_KEY_HINTS[provider]}, {REQUIRE_HINT}"
    if not key:
        return None, f"no {key_name} in the node environment (read: {where}): {hint}"
    if not instance_id:
        return None, f"no {id_name} in the node environment (read: {where}): {hint}"
    if provider == "vastai" and not instance_id.isdigit():
        return None, (
            f"{id_name}={clean_text(instance_id, 40)!r} (from {id_source}) is not a Vast "
            f"instance number; {REQUIRE_HINT}"
        )
    return Credentials(provider, instance_id, key, key_source), ""


class ApiAnswer:
    """One provider API answer: HTTP status (None: no answer), parsed body, transport error."""

    def __init__(self, status: int | None, body: Any, error: str = "") -> None:
        self.status = status
        self.body = body
        self.error = error

    @property
    def transient(self) -> bool:
        return self.status is None or self.status in (408, 429) or self.status >= 500

    def field(self, name: str) -> Any:
        return self.body.get(name) if isinstance(self.body, dict) else None

    def describe(self) -> str:
        if self.status is None:
            return f"no answer ({self.error})"
        text = ""
        if isinstance(self.body, dict):
            parts = [self.body.get(k) for k in ("error", "msg", "title", "detail", "message")]
            text = " ".join(str(p) for p in parts if p)
        elif isinstance(self.body, str):
            text = self.body
        # Bounded only loosely here: the switch's records redact (the instance key) and
        # then cut, so a cut never shows a secret's prefix.
        text = clean_text(text.replace("\n", " ").strip(), 2000)
        return f"HTTP {self.status}" + (f" {text}" if text else "")


def _no_redirects() -> urllib.request.HTTPRedirectHandler:
    """A handler that follows no redirect: the instance key is never carried to wherever a
    redirect points."""
    import urllib.request

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self,
            req: urllib.request.Request,
            fp: IO[bytes],
            code: int,
            msg: str,
            headers: Any,
            newurl: str,
        ) -> urllib.request.Request | None:
            return None

    return NoRedirects()


def api_request(
    method: str, url: str, key: str, body: Any = None, timeout: float = WATCHDOG_HTTP_TIMEOUT_S
) -> ApiAnswer:
    """One authenticated JSON call (Bearer key, our own User-Agent); never raises."""
    import http.client
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "User-Agent": WATCHDOG_USER_AGENT,
    }
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    opener = urllib.request.build_opener(_no_redirects())
    try:
        with opener.open(request, timeout=timeout) as response:
            status, raw = response.status, response.read(1 << 20)
    except urllib.error.HTTPError as exc:
        status = exc.code
        try:
            raw = exc.read(1 << 20)
        except (OSError, http.client.HTTPException):
            raw = b""
    except urllib.error.URLError as exc:
        reason = exc.reason
        text = str(reason)
        if "CERTIFICATE" in text.upper() or "SSL" in type(reason).__name__.upper():
            text = f"TLS failure: {text} (the node may lack CA certificates)"
        return ApiAnswer(None, None, clean_text(text, 2000))
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return ApiAnswer(None, None, clean_text(f"{_name(exc)}: {exc}", 2000))
    text = raw.decode("utf-8", "replace")
    try:
        parsed: Any = json.loads(text) if text.strip() else None
    except ValueError:
        parsed = text
    return ApiAnswer(status, parsed)


class InstanceApi:
    """The three calls the switch makes for its own instance, and how to read the answers."""

    name = ""

    def __init__(self, base_url: str, creds: Credentials) -> None:
        self.base_url = base_url
        self.creds = creds

    def read(self) -> ApiAnswer:
        raise NotImplementedError

    def delete(self) -> ApiAnswer:
        raise NotImplementedError

    def shows_self(self, answer: ApiAnswer) -> bool:
        raise NotImplementedError

    def is_gone(self, answer: ApiAnswer) -> bool:
        raise NotImplementedError

    def delete_accepted(self, answer: ApiAnswer) -> bool:
        return answer.status in (200, 202, 204) and answer.field("success") is not False

    def refused(self, answer: ApiAnswer) -> bool:
        return answer.status in (401, 403)

    def refusal_text(self, answer: ApiAnswer, doing: str) -> str:
        return (
            f"{self.name} refused the instance key ({answer.describe()}) {doing}: this node "
            f"cannot destroy itself; {REQUIRE_HINT}"
        )

    def retry_floor(self, answer: ApiAnswer) -> float:
        return 0.0


class VastInstanceApi(InstanceApi):
    """Vast v0, as the official client calls it for one instance (ours research/vastai.md)."""

    name = "Vast"

    @property
    def url(self) -> str:
        return f"{self.base_url}/api/v0/instances/{self.creds.instance_id}/"

    def read(self) -> ApiAnswer:
        return api_request("GET", self.url + "?owner=me", self.creds.key)

    def delete(self) -> ApiAnswer:
        return api_request("DELETE", self.url, self.creds.key, body={})

    def _row(self, answer: ApiAnswer) -> Any:
        return answer.field("instances") if answer.status == 200 else None

    def shows_self(self, answer: ApiAnswer) -> bool:
        row = self._row(answer)
        return isinstance(row, dict) and str(row.get("id")) == self.creds.instance_id

    def is_gone(self, answer: ApiAnswer) -> bool:
        if answer.status == 200:
            return (
                isinstance(answer.body, dict)
                and "instances" in answer.body
                and (answer.body["instances"] is None)
            )
        # A 404 is "gone" only in Vast's own shape; a 404 auth_error is a bad key.
        return answer.status == 404 and answer.field("error") in ("no_such_instance", "not_found")

    def refused(self, answer: ApiAnswer) -> bool:
        auth_404 = answer.status == 404 and (
            answer.field("error") == "auth_error" or "Invalid user key" in str(answer.body)
        )
        return answer.status in (401, 403) or auth_404

    def retry_floor(self, answer: ApiAnswer) -> float:
        return VAST_RATE_LIMIT_WAIT_S if answer.status == 429 else 0.0


class RunPodInstanceApi(InstanceApi):
    """RunPod REST (v2 by default): GET / DELETE /pods/{id} with the pod-scoped key."""

    name = "RunPod"

    @property
    def url(self) -> str:
        return f"{self.base_url}/pods/{urllib.parse.quote(self.creds.instance_id, safe='')}"

    def read(self) -> ApiAnswer:
        return api_request("GET", self.url, self.creds.key)

    def delete(self) -> ApiAnswer:
        return api_request("DELETE", self.url, self.creds.key)

    def shows_self(self, answer: ApiAnswer) -> bool:
        return answer.status == 200 and str(answer.field("id")) == self.creds.instance_id

    def is_gone(self, answer: ApiAnswer) -> bool:
        # RunPod's own error shapes only (v1 {error, status}, v2 problem+json {title, status,
        # detail}): an HTML 404 from a wrong base URL is not "deleted".
        body = answer.body
        shaped = (
            isinstance(body, dict) and "status" in body and ("error" in body or "title" in body)
        )
        return answer.status == 404 and shaped

    def refused(self, answer: ApiAnswer) -> bool:
        return answer.status in (401, 403) and not self._cloudflare(answer)

    def _cloudflare(self, answer: ApiAnswer) -> bool:
        return answer.status == 403 and "error code: 1010" in str(answer.body)

    def refusal_text(self, answer: ApiAnswer, doing: str) -> str:
        return (
            f"RunPod refused the pod-scoped RUNPOD_API_KEY ({answer.describe()}) {doing}: this "
            "pod cannot destroy itself (an open risk: RunPod pod keys have been seen refused "
            f"with HTTP 403 on self-delete); {REQUIRE_HINT}"
        )

    def retry_floor(self, answer: ApiAnswer) -> float:
        return 0.0


def instance_api(settings: WatchdogSettings, creds: Credentials) -> InstanceApi:
    if creds.provider == "runpod":
        return RunPodInstanceApi(settings.api_url, creds)
    return VastInstanceApi(settings.api_url, creds)


# ---------------------------------------------------------------------------------------
# The boot guard: armed by the instance's start command, stood down here

BOOT_GUARD_VERDICT_WAIT_S = 5.0  # the guard writes its verdict first thing; a race waits this
BOOT_GUARD_LINE_MAX = 300


def _guard_verdict_line(directory: Path, wait_s: float) -> str | None:
    """The guard's one-line verdict; None when none shows within `wait_s` (bounded polling:
    the guard and the agent share only the file system)."""
    path = directory / BOOT_GUARD_VERDICT_FILE
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with path.open("rb") as handle:
                return handle.read(BOOT_GUARD_LINE_MAX).decode("utf-8", "replace").strip()
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        except OSError as exc:
            return f"failed its verdict file is unreadable: {exc.strerror or exc}"


def boot_guard_report(
    env: Mapping[str, str], provider: str, wait_s: float = BOOT_GUARD_VERDICT_WAIT_S
) -> tuple[str, dict[str, Any]]:
    """Stand the boot guard down and say what it reported: (phase status, detail).

    The verdict is read before the marker is written: the guard clears stale markers as it
    starts, so a marker written before its verdict could be wiped and the guard would fire."""
    if provider in LOCAL_PROVIDERS:
        why = "a local or Docker node does not bill: no boot guard runs"
        return "ready", {"state": "not_needed", "armed": False, "reason": why}
    directory = Path(env.get(BOOT_GUARD_DIR_ENV, "").strip() or BOOT_GUARD_DIR)
    detail: dict[str, Any] = {"dir": str(directory), "armed": False}
    if not directory.is_dir():
        why = (
            "no boot guard ran on this node (its start command armed none: an instance "
            "created by an older mvp-tui, or another command)"
        )
        detail.update(state="none", reason=why)
        return "ready", detail
    line = _guard_verdict_line(directory, wait_s)
    try:
        marker = directory / BOOT_GUARD_STAND_DOWN_FILE
        marker.write_text(f"{os.getpid()} {time.time():.3f}\n", encoding="utf-8")
        detail["stood_down"] = True
    except OSError as exc:
        # Opting out of require_node_watchdog would not help here: the guard still fires.
        why = (
            f"cannot stand the boot guard down ({exc.strerror or exc}: {directory}): it will "
            "destroy this instance at the end of its grace; make that directory writable, or "
            "rent with [limits] boot_grace_mins = 0"
        )
        detail.update(state="failed", reason=why)
        return "failed", detail
    words = (line or "").split()
    if words[:1] == ["armed"] and len(words) == 3 and words[2].isdigit():
        detail.update(state="armed", armed=True, tool=words[1][:16], grace_s=int(words[2]))
        return "ready", detail
    if words == ["off"]:
        detail.update(state="off", reason="off: [limits] boot_grace_mins = 0")
        return "ready", detail
    why = " ".join(words[1:]) if words[:1] == ["failed"] else ""
    if not why:
        why = f"an unreadable verdict {line!r}" if line else f"no verdict within {wait_s:g} s"
    fix = "use an image with the instance key and python3 or curl"
    detail.update(state="failed", reason=f"the boot guard cannot run: {why}; {fix}, {REQUIRE_HINT}")
    return "failed", detail


class Watchdog:
    """The node's own dead-man's switch. A timer thread watches the deadline and the
    silence; when one passes it asks the agent to stop (the `Control` inbox), and the main
    thread, once the engine is stopped, calls `finish` to destroy the instance (or, on a
    local/docker node, just end). Control lines arrive from the command readers."""

    def __init__(
        self,
        env: Mapping[str, str],
        settings: WatchdogSettings,
        emitter: Emitter,
        control: Control,
        redactor: Redactor,
    ) -> None:
        self.env = env
        self.settings = settings
        self.emitter = emitter
        self.control = control
        self.redactor = redactor
        self.started_wall = time.time()
        self.deadline_at: float | None = None
        if settings.max_hours > 0:
            start = settings.lease_started_at or self.started_wall
            self.deadline_at = start + settings.max_hours * 3600.0
        self.idle_s = settings.idle_mins * 60.0 if settings.idle_mins > 0 else None
        self.fired: str | None = None
        self.verdict: str | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._last_heard = time.monotonic()  # the silence timer starts with the agent
        self._silence_armed = self.idle_s is not None
        # The idle stop counts from when the engine serves (a download may take longer than
        # its window); None until then, and for ever on a node with no gate to count uses.
        self.idle_stop_s = settings.idle_stop_mins * 60.0 if settings.idle_stop_mins > 0 else None
        self._last_use: float | None = None
        self._warned = False
        self._creds: Credentials | None = None
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def provider(self) -> str:
        return self.settings.provider

    @property
    def uses_api(self) -> bool:
        return self.provider in API_PROVIDERS

    # -- any thread

    def start(self) -> None:
        """Start the timer thread when there is something to enforce."""
        timed = (self.deadline_at, self.idle_s, self.idle_stop_s)
        if self.enabled and any(x is not None for x in timed):
            self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
            self._thread.start()

    def command(self, word: str, source: str) -> None:
        """`heartbeat`, `detach`, `attach` or `use` (a key pressed in the dashboard: it
        postpones the idle stop), heard on `source`."""
        if word == "use":
            self.note_use()
        with self._lock:
            if word == "detach":
                self._silence_armed = False
            elif word == "attach":
                self._silence_armed = self.idle_s is not None
            self._last_heard = time.monotonic()
            armed = self._silence_armed
        self._wake.set()
        if word not in ("heartbeat", "use"):
            self.emitter.progress(
                WATCHDOG_PHASE,
                state="detached" if word == "detach" else "attached",
                source=source,
                idle_armed=armed,
                deadline_at=_rounded(self.deadline_at),
                idle_teardown_mins=self.settings.idle_mins or None,
            )

    def serving(self) -> None:
        """The engine serves through the gate: the idle stop's clock starts."""
        if self.idle_stop_s is None or not self.enabled:
            return
        with self._lock:
            self._last_use = time.monotonic()
        self._wake.set()
        self.emitter.progress(WATCHDOG_PHASE, state="idle_stop_armed",
                              idle_stop_mins=self.settings.idle_stop_mins)  # fmt: skip

    def note_use(self) -> None:
        """A request reached the engine (or a key in the dashboard): the idle stop waits."""
        with self._lock:
            if self._last_use is None:
                return
            self._last_use = time.monotonic()
            warned, self._warned = self._warned, False
        if warned:
            self._wake.set()
            self.emitter.progress(WATCHDOG_PHASE, state="idle_stop_postponed",
                                  idle_stop_mins=self.settings.idle_stop_mins)  # fmt: skip

    def close(self) -> str | None:
        """No firing from now on (the agent is stopping); the trigger if it already fired."""
        with self._lock:
            self._closed = True
            fired = self.fired
        self._wake.set()
        return fired

    # -- the verdict (main thread, right after config)

    def report_verdict(self) -> None:
        if not self.enabled:
            return
        if self.control.stop_requested:
            raise Interrupted()
        self.report_boot_guard()
        started = time.monotonic()
        reason = self.settings.problem
        detail: dict[str, Any] = {}
        if reason is None and self.uses_api:
            try:
                reason, detail = self._prove()
            except Interrupted:
                failed = self._detail()
                failed.update(reason="interrupted by shutdown", armed=False)
                self.emitter.phase(WATCHDOG_PHASE, "failed", failed, _ms_since(started))
                raise
        base = self._detail()
        if reason is not None:
            self.verdict = "failed"
            base.update(reason=clean_text(reason, 600, redact=self.emitter.redact), armed=False)
            self.emitter.phase(WATCHDOG_PHASE, "failed", base, _ms_since(started))
            self.emitter.stderr(f"mvp-node: dead-man's switch verdict failed: {reason}")
            return
        self.verdict = "ready"
        base.update(detail)
        base["armed"] = (
            self.deadline_at is not None or self._silence_armed or self.idle_stop_s is not None
        )
        base["action"] = "destroy" if self.uses_api else "end"
        self.emitter.phase(WATCHDOG_PHASE, "ready", base, _ms_since(started))

    def report_boot_guard(self) -> None:
        """The boot guard's verdict, as its own phase, first thing: once the agent runs, the
        guard stands down (this node has an agent; the switch takes over)."""
        if self.provider not in API_PROVIDERS + LOCAL_PROVIDERS:
            return  # an unknown provider: the switch's verdict says so
        started = time.monotonic()
        status, detail = boot_guard_report(self.env, self.provider)
        if "reason" in detail:
            detail["reason"] = clean_text(detail["reason"], 600, redact=self.emitter.redact)
        self.emitter.phase(BOOT_GUARD_PHASE, status, detail, _ms_since(started))
        if status == "failed":
            self.emitter.stderr(f"mvp-node: boot guard: {detail['reason']}")

    def _detail(self) -> dict[str, Any]:
        creds = self._creds
        return {
            "provider": self.provider,
            "instance_id": creds.instance_id if creds is not None else None,
            "deadline_at": _rounded(self.deadline_at),
            "idle_teardown_mins": self.settings.idle_mins or None,
            "idle_armed": self._silence_armed,
            "idle_stop_mins": self.settings.idle_stop_mins or None,
        }

    def _credentials(self) -> tuple[Credentials | None, str]:
        if self._creds is not None:
            return self._creds, ""
        creds, why = resolve_credentials(self.provider, self.env, self.settings.env_file)
        if creds is not None:
            self.redactor.add(creds.key)  # before anything could print it
            self._creds = creds
        return creds, why

    def _prove(self) -> tuple[str | None, dict[str, Any]]:
        """(None, detail) when a harmless authenticated read of our own instance worked,
        else (reason, {})."""
        creds, why = self._credentials()
        if creds is None:
            return why, {}
        api = instance_api(self.settings, creds)
        doing = f"reading {api.name} instance {creds.instance_id} at {self.settings.api_url}"
        delay = self.settings.retry_initial_s
        answer = api.read()
        tries = 1
        while answer.transient and tries < VERDICT_ATTEMPTS:
            self._pause_interruptibly(
                max(min(delay, WATCHDOG_RETRY_CAP_S), api.retry_floor(answer))
            )
            delay *= 2
            answer = api.read()
            tries += 1
        if api.shows_self(answer):
            detail = {"proof": "read", "credentials": creds.source, "api_url": api.base_url}
            return None, detail
        if api.refused(answer):
            return api.refusal_text(answer, doing), {}
        if answer.transient:
            return (
                f"cannot reach the {api.name} API to prove the switch ({answer.describe()} "
                f"after {tries} tries, {doing}): the node needs outbound HTTPS to it; "
                f"{REQUIRE_HINT}"
            ), {}
        if api.is_gone(answer) or answer.status == 200:
            return (
                f"{api.name} does not show instance {creds.instance_id} to its own key "
                f"({answer.describe()}): the instance id in the node environment is not "
                f"this machine's; {REQUIRE_HINT}"
            ), {}
        return f"unexpected answer {doing}: {answer.describe()}; {REQUIRE_HINT}", {}

    def _pause_interruptibly(self, seconds: float) -> None:
        """A retry pause during the verdict that a shutdown ends (no engine runs yet, so
        taking events from the inbox loses nothing)."""
        deadline = time.monotonic() + seconds
        while not self.control.stop_requested:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.control.wait(left)
        raise Interrupted()

    # -- the timer thread

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
            trigger, wait = self._due()
            if trigger is not None:
                self._fire(trigger)
                return
            self._wake.wait(wait)
            self._wake.clear()  # state is re-read after this, so no wake-up is lost

    def _due(self) -> tuple[str | None, float]:
        """The trigger that has passed, else how long to wait before looking again."""
        waits = [WATCHDOG_WAIT_CAP_S]
        if self.deadline_at is not None:
            left = self.deadline_at - time.time()
            if left <= 0:
                return "deadline", 0.0
            waits.append(left)
        with self._lock:
            armed, last = self._silence_armed, self._last_heard
        if armed and self.idle_s is not None:
            left = last + self.idle_s - time.monotonic()
            if left <= 0:
                return "idle", 0.0
            waits.append(left)
        unused = self._idle_stop_due()
        if unused is not None and unused <= 0:
            return "idle_stop", 0.0
        if unused is not None:
            waits.append(unused)
        return None, max(min(waits), 0.001)

    def _idle_stop_due(self) -> float | None:
        """Seconds until the idle stop's next step (its warning, then the stop), or None."""
        with self._lock:
            last, warned = self._last_use, self._warned
        if last is None or self.idle_stop_s is None:
            return None
        warn_s = min(IDLE_STOP_WARN_S, self.idle_stop_s / 4.0)
        left = last + self.idle_stop_s - time.monotonic()
        if left <= 0 or warned:
            return left
        if left > warn_s:
            return left - warn_s
        with self._lock:
            self._warned = True
        self.emitter.progress(WATCHDOG_PHASE, state="idle_stop_warning",
                              idle_stop_mins=self.settings.idle_stop_mins,
                              stops_in_s=round(left, 3))  # fmt: skip
        return left

    def _fire(self, trigger: str) -> None:
        with self._lock:
            if self._closed or self.control.stop_requested:
                return  # a shutdown is already under way: the dashboard is in charge
            self.fired = trigger
            silent_s = time.monotonic() - self._last_heard
            unused_s = None if self._last_use is None else time.monotonic() - self._last_use
        detail = self._detail()
        detail.update(trigger=trigger, silent_s=round(silent_s, 3))
        if trigger == "idle_stop" and unused_s is not None:
            detail["unused_s"] = round(unused_s, 3)
        detail["action"] = "destroy" if self.uses_api else "end"
        self.emitter.phase(WATCHDOG_PHASE, "started", detail)
        self.emitter.stderr(f"mvp-node: dead-man's switch fired ({trigger}); stopping the engine")
        self.control.request_stop(f"watchdog {trigger}")

    # -- after the engine stopped (main thread)

    def finish(self, trigger: str) -> None:
        """Destroy our own instance until the provider confirms it is gone (never gives up),
        or on a local/docker node just record the end."""
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        started = time.monotonic()
        if not self.uses_api:
            detail = self._detail()
            detail.update(trigger=trigger, destroyed=False, ended=True)
            self.emitter.phase(WATCHDOG_PHASE, "ready", detail, _ms_since(started))
            return
        attempts = self._destroy_until_gone()
        detail = self._detail()
        detail.update(trigger=trigger, destroyed=True, attempts=attempts)
        self.emitter.phase(WATCHDOG_PHASE, "ready", detail, _ms_since(started))

    def _destroy_until_gone(self) -> int:
        delay = self.settings.retry_initial_s
        attempt = 0
        while True:
            attempt += 1
            floor = 0.0
            creds, why = self._credentials()
            if creds is None:
                problem = f"cannot destroy: {why}"
            else:
                api = instance_api(self.settings, creds)
                what = f"{api.name} instance {creds.instance_id}"
                answer = api.delete()
                floor = api.retry_floor(answer)
                if api.delete_accepted(answer) or api.is_gone(answer):
                    check = api.read()
                    if api.is_gone(check):
                        return attempt
                    floor = api.retry_floor(check)
                    problem = f"{what} still shows after its destroy ({check.describe()})"
                elif api.refused(answer):
                    problem = api.refusal_text(answer, f"destroying {what}")
                else:
                    problem = f"destroy of {what} failed: {answer.describe()}"
            wait = max(min(delay, WATCHDOG_RETRY_CAP_S), floor)
            self.emitter.notice(
                f"dead-man's switch: attempt {attempt}: "
                f"{clean_text(problem, 600, redact=self.emitter.redact)}; "
                f"retrying in {wait:g} s"
            )
            time.sleep(wait)
            delay = min(delay * 2, WATCHDOG_RETRY_CAP_S)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# ---------------------------------------------------------------------------------------
# The agent


class Agent:
    """Runs the phases top to bottom and always leaves no engine behind."""

    def __init__(
        self,
        env: Mapping[str, str],
        settings: Settings,
        emitter: Emitter,
        control: Control,
        watchdog: Watchdog | None = None,
    ) -> None:
        self.env = env
        self.settings = settings
        self.emitter = emitter
        self.control = control
        self.watchdog = watchdog
        self.engine: Engine | None = None
        self.gate: Gate | None = None
        self._engine_key = ""  # the key the engine itself checks (llama-server only)

    def run(self) -> int:
        s = self.settings
        try:
            self._phase("config", lambda: s.summary(self.env))
            if self.watchdog is not None:
                self.watchdog.report_verdict()
            self._phase("probe", lambda: self._probe(s))
            model = self._phase_value("model", self._resolve_model)
            self._phase("engine_start", lambda: self._start_engine(model))
            self._phase("engine_health", self._wait_healthy)
            return self._watch()
        except Interrupted:
            return self._shutdown()
        except PhaseFailed as failure:
            return self.fail(failure)

    def _probe(self, settings: Settings) -> dict[str, Any]:
        """The node as found; an image without an engine fails here, before the model is
        downloaded, naming everything it lacks."""
        detail = probe_environment(settings)
        if LACKS_ENGINE in detail["lacks"]:
            failure = no_engine()
            lacks = "; ".join(detail["lacks"])
            raise PhaseFailed(
                f"{failure}; it lacks: {lacks}", failure.fix, detail=detail, scope=SCOPE_RUN
            )
        return detail

    # -- phase plumbing

    def _phase(self, name: str, body: Callable[[], dict[str, Any]]) -> None:
        self._phase_value(name, lambda: (None, body()))

    def _phase_value(self, name: str, body: Callable[[], tuple[Any, dict[str, Any]]]) -> Any:
        """Runs one phase: `started`, then `ready` with its detail or `failed` with why."""
        if self.control.stop_requested:
            raise Interrupted()
        self.emitter.phase(name, "started", {})
        started = time.monotonic()
        try:
            value, detail = body()
        except PhaseFailed as failure:
            failure.detail.setdefault("phase", name)
            self.emitter.phase(
                name,
                "failed",
                {"reason": failure.reason, "fix": failure.fix},
                _ms_since(started),
            )
            raise
        except Interrupted:
            self.emitter.phase(
                name, "failed", {"reason": "interrupted by shutdown"}, _ms_since(started)
            )
            raise
        except ConfigError as exc:
            self.emitter.phase(name, "failed", {"reason": str(exc)}, _ms_since(started))
            raise PhaseFailed(str(exc), exit_code=EXIT_CONFIG, detail={"phase": name}) from None
        self.emitter.phase(name, "ready", detail, _ms_since(started))
        return value

    def fail(self, failure: PhaseFailed) -> int:
        trigger = self.watchdog.close() if self.watchdog is not None else None
        self.emitter.weights(
            WORKER_FATAL,
            reason=failure.reason,
            fix=failure.fix,
            model_id=self._alias(),
            scope=failure.scope,
            **failure.detail,
        )
        self.stop_engine()
        if trigger is not None and self.watchdog is not None:
            self.watchdog.finish(trigger)  # the switch fired first: it still destroys
        self.emitter.phase(
            "agent_exit", "failed", {"exit_code": failure.exit_code, "reason": failure.reason}
        )
        return failure.exit_code

    # -- phases

    def _resolve_model(self) -> tuple[Path, dict[str, Any]]:
        s = self.settings
        if s.gguf_local_path:
            path = Path(s.gguf_local_path).expanduser()
            problem = gguf_problem(path)
            if problem:
                raise PhaseFailed(
                    f"{LOCAL_PATH_KEY} = {path}: {problem}",
                    fix="point [model] gguf_local_path at a .gguf file on the node, or set "
                    "[model] gguf_repo and gguf_file to download one",
                    exit_code=EXIT_CONFIG,
                )
            return path, {"source": "local", "path": str(path), "bytes": path.stat().st_size}
        if not s.gguf_repo:
            raise PhaseFailed(
                f"no model: {LOCAL_PATH_KEY} is empty and no [model] gguf_repo / gguf_file "
                "to download",
                fix="set [model] gguf_local_path, or [model] gguf_repo and gguf_file",
                exit_code=EXIT_CONFIG,
            )
        dest = model_cache_path(s)
        detail: dict[str, Any] = {"source": "hub", "repo": s.gguf_repo, "file": s.gguf_file}
        detail.update(revision=s.gguf_revision, path=str(dest))
        if dest.exists() and gguf_problem(dest) is None:
            detail.update(cached=True, bytes=dest.stat().st_size)
            return dest, detail
        url = hub_url(s)
        try:
            detail.update(Downloader(s, self.emitter, self.control).fetch(url, dest))
        except DownloadError as exc:
            raise PhaseFailed(
                f"model download of {url} failed: {exc}; without network, copy the file to "
                f"the node and set {LOCAL_PATH_KEY}",
                fix="check the node's network and HF_TOKEN, or set [model] gguf_local_path",
                # Missing, denied or corrupt at the source fails on every host; a slow or
                # broken link is this host's.
                scope=SCOPE_RUN if exc.permanent and not exc.stalled else SCOPE_HOST,
            ) from None
        except OSError as exc:
            raise PhaseFailed(
                f"cannot write the model under {s.cache_dir}: {exc}; set MVP_MODEL_CACHE_DIR "
                f"or {LOCAL_PATH_KEY}",
                fix="free disk space or choose another cache dir",
            ) from None
        detail.update(cached=False)
        return dest, detail

    def _alias(self) -> str:
        return self.settings.model_id or "model"

    def _gate_wanted(self) -> bool:
        """A key to check or uses to count: the engine goes behind the gate."""
        idle_stop = self.watchdog is not None and self.watchdog.idle_stop_s is not None
        return bool(self.settings.api_key) or idle_stop

    def _start_engine(self, model: Path) -> dict[str, Any]:
        settings = self.settings
        if self._gate_wanted():  # the engine on a private loopback port; the gate on ours
            settings = copy.copy(self.settings)
            settings.engine_host, settings.engine_port = ENGINE_HOST, 0
        spec = engine_spec(settings, model, self._alias())
        if self.settings.api_key and spec.kind == "llama-server":
            # Passed on purpose (the filter below drops *KEY* names): the engine checks the
            # key too, so its private port is no way around the gate.
            self._engine_key = self.settings.api_key
            spec.env["LLAMA_API_KEY"] = self._engine_key
        engine = Engine(spec, self.emitter, self.control)
        self.engine = engine
        engine_env = {k: v for k, v in self.env.items() if not is_secret_name(k)}
        cwd = model.parent if model.parent.is_dir() else Path.cwd()
        pid = engine.start(engine_env, cwd)
        return {"engine": spec.kind, "pid": pid, "port": spec.port, "argv": spec.argv}

    def _open_gate(self, engine: Engine) -> tuple[int, str]:
        """The port and URL clients use: the gate's once it listens, else the engine's."""
        if not self._gate_wanted():
            return engine.spec.port, engine.spec.base_url
        s = self.settings
        watchdog = self.watchdog
        gate = Gate(s.engine_host, s.engine_port, engine.spec.port, s.api_key,
                    engine_key=self._engine_key,
                    on_use=watchdog.note_use if watchdog is not None else None)  # fmt: skip
        try:
            port = gate.start()
        except OSError as exc:
            raise PhaseFailed(
                f"cannot open the engine's port {s.engine_host}:{s.engine_port}: "
                f"{exc.strerror or exc}",
                fix="free that port or leave MVP_ENGINE_PORT unset",
            ) from None
        self.gate = gate
        if watchdog is not None:
            watchdog.serving()
        return port, f"http://{ENGINE_HOST}:{port}"

    def _wait_healthy(self) -> dict[str, Any]:
        assert self.engine is not None
        engine = self.engine
        url = engine.spec.base_url + engine.spec.ready_path
        started = time.monotonic()
        deadline = started + self.settings.ready_timeout_s
        interval = self.settings.health_poll_s or HEALTH_POLL_FIRST_S
        longest = self.settings.health_poll_s or HEALTH_POLL_MAX_S
        last_state = ""
        while True:
            state, status = probe_ready(url)
            if state != last_state:
                last_state = state
                self.emitter.progress(
                    "engine_health",
                    state=state,
                    http_status=status,
                    url=url,
                    elapsed_ms=_ms_since(started),
                )
            if state == "ready":
                break
            if time.monotonic() >= deadline:
                raise PhaseFailed(
                    f"engine not ready after {self.settings.ready_timeout_s:.0f} s "
                    f"(last probe: {state} {status or ''})",
                    fix="raise MVP_ENGINE_READY_TIMEOUT_S or read the engine log channel",
                    detail={"last_log_lines": list(engine.last_lines)},
                )
            event = self.control.wait(min(interval, max(deadline - time.monotonic(), 0.0)))
            interval = min(interval * 1.5, longest)
            if self.control.stop_requested:
                raise Interrupted()
            if event is not None and event[0] == Control.ENGINE_EXIT:
                raise self._engine_died(event[1], "before it was ready")
        load_ms = _ms_since(started)
        port, base_url = self._open_gate(engine)
        self._report_loaded(
            WEIGHTS_LOADED,
            model_id=self._alias(),
            engine=engine.spec.kind,
            port=port,
            base_url=base_url,
            openai_base_url=base_url + "/v1",
            engine_pid=engine.proc.pid if engine.proc else None,
            load_ms=load_ms,
            auth="key" if self.gate is not None and self.settings.api_key else "none",
            idle_stop_mins=self.watchdog.settings.idle_stop_mins or None
            if self.watchdog is not None and self.gate is not None
            else None,
        )
        return {"url": url, "load_ms": load_ms}

    def _report_loaded(self, kind: str, **fields: Any) -> None:
        """The engine serves: say so (a role may first check more, and raise PhaseFailed)."""
        self.emitter.weights(kind, **fields)

    def _engine_died(self, code: int | None, when: str) -> PhaseFailed:
        assert self.engine is not None
        self.engine.flush_log()
        lines = list(self.engine.last_lines)
        if model_unreadable(lines):  # the file, not this host: every host would fail it
            return PhaseFailed(
                f"the engine cannot load the model (exit code {code} {when}): "
                f"{next(x for x in lines if model_unreadable([x]))}",
                fix="the GGUF file is corrupt or not a model this engine reads: download it "
                "again, or point [model] gguf_local_path / gguf_repo + gguf_file at another",
                detail={"exit_code": code, "last_log_lines": lines},
                scope=SCOPE_RUN,
            )
        return PhaseFailed(
            f"engine exited unexpectedly with code {code} {when}",
            fix=f"read the engine log channel (mvp.node.{self.settings.node_id}.engine)",
            detail={"exit_code": code, "last_log_lines": lines},
        )

    def _watch(self) -> int:
        assert self.engine is not None
        pid = self.engine.proc.pid if self.engine.proc else None
        self.emitter.phase("watch", "started", {"engine_pid": pid})
        started = time.monotonic()
        while True:
            event = self.control.wait(1.0)
            if self.control.stop_requested:
                self.emitter.phase(
                    "watch", "ready", {"reason": "shutdown requested"}, _ms_since(started)
                )
                return self._shutdown()
            if event is not None and event[0] == Control.ENGINE_EXIT:
                failure = self._engine_died(event[1], "while serving")
                failure.detail["phase"] = "watch"
                self.emitter.phase(
                    "watch", "failed", {"reason": failure.reason}, _ms_since(started)
                )
                return self.fail(failure)

    def _shutdown(self) -> int:
        trigger = self.watchdog.close() if self.watchdog is not None else None
        source = self.control.stop_source or "request"
        self.emitter.phase("shutdown", "started", {"source": source})
        started = time.monotonic()
        detail = self.stop_engine()
        self.emitter.phase("shutdown", "ready", detail, _ms_since(started))
        if trigger is not None and self.watchdog is not None:
            self.watchdog.finish(trigger)  # after the engine stopped: destroy, or just end
        self.emitter.phase("agent_exit", "ready", {"exit_code": EXIT_OK, "source": source})
        return EXIT_OK

    def stop_engine(self) -> dict[str, Any]:
        if self.gate is not None:
            self.gate.close()
            self.gate = None
        if self.engine is None:
            return {"engine": "not started"}
        return self.engine.stop(self.settings.stop_timeout_s)


# ---------------------------------------------------------------------------------------
# Roles of a multi-node run (llama.cpp's RPC backend): one main node runs llama-server with
# `--rpc` listing the workers; each worker runs ggml-rpc-server bound to loopback (the RPC
# protocol has no authentication: its port is reached through loopback or an SSH tunnel only).

ROLE_SINGLE = "single"
ROLE_MAIN = "main"
ROLE_WORKER = "worker"
RPC_SERVER_BIN = "ggml-rpc-server"
LLAMA_SERVER_BIN = "llama-server"
RPC_BIN_FIX = (
    "build llama.cpp with -DGGML_RPC=ON (scripts/llama-rpc-build.sh does) and put its bin "
    "directory on PATH or in MVP_RPC_BIN_DIR"
)
RPC_PROBE_TIMEOUT_S = 1.0
PLACEMENT_GRACE_S = 10.0  # how long the placement proof waits for the log reader to catch up
# llama.cpp's load log: `load_tensors:   RPC0[127.0.0.1:50052] model buffer size = 12.3 MiB`
# (one per device) and `CPU_Mapped model buffer size = …` for what stayed on the main node.
_BUFFER_LINE = re.compile(r"(\S+?)(?:\[([^\]\s]+)\])? model buffer size =\s*([0-9.]+) MiB")


class RoleSettings:
    """The MVP_* keys of a multi-node role, parsed once (ConfigError names key and fix)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.role = env.get("MVP_NODE_ROLE", "").strip().lower() or ROLE_SINGLE
        if self.role not in (ROLE_SINGLE, ROLE_MAIN, ROLE_WORKER):
            raise ConfigError(
                f"MVP_NODE_ROLE={self.role!r} is not a node role; fix: main, worker or unset"
            )
        self.bin_dir = env.get("MVP_RPC_BIN_DIR", "").strip()
        self.rpc_port = _env_int(env, "MVP_RPC_PORT", 0, low=0, high=65535)
        self.rpc_servers = _csv(env.get("MVP_RPC_SERVERS", ""))
        self.rpc_nodes = _csv(env.get("MVP_RPC_NODES", ""))
        self.tensor_split = env.get("MVP_TENSOR_SPLIT", "").strip()
        self.gpu_layers = _env_int(env, "MVP_GPU_LAYERS", 99, low=0)
        # Rented nodes: the worker authorizes the run's tunnel key for its RPC port only; the
        # main node reaches each worker through `ssh -L` with the private half.
        self.tunnel_pubkey = env.get("MVP_RPC_TUNNEL_PUBKEY", "").strip()
        self.authorized_keys = env.get("MVP_RPC_AUTHORIZED_FILE", "").strip() or os.path.join(
            os.path.expanduser("~"), ".ssh", "authorized_keys"
        )
        self.tunnels = _csv(env.get("MVP_RPC_TUNNELS", ""))
        self.tunnel_key = env.get("MVP_RPC_TUNNEL_KEY", "")
        self.known_hosts = env.get("MVP_RPC_KNOWN_HOSTS", "")
        for tunnel in self.tunnels:
            _split_tunnel(tunnel)
        if self.tunnels and (len(self.tunnels) != len(self.rpc_servers) or not self.tunnel_key):
            raise ConfigError(
                "MVP_RPC_TUNNELS needs one entry per MVP_RPC_SERVERS entry and "
                "MVP_RPC_TUNNEL_KEY; fix: let the dashboard start the main node"
            )
        for endpoint in self.rpc_servers:
            _split_endpoint(endpoint)
        if self.role == ROLE_MAIN and not self.rpc_servers:
            raise ConfigError(
                "MVP_NODE_ROLE=main needs MVP_RPC_SERVERS (host:port of each worker, "
                "comma-separated); fix: start the main node after its workers"
            )
        if self.rpc_nodes and len(self.rpc_nodes) != len(self.rpc_servers):
            raise ConfigError(
                f"MVP_RPC_NODES names {len(self.rpc_nodes)} nodes for "
                f"{len(self.rpc_servers)} MVP_RPC_SERVERS; fix: one node id per server"
            )
        if self.tensor_split and not re.fullmatch(r"[0-9.]+(,[0-9.]+)*", self.tensor_split):
            raise ConfigError(
                f"MVP_TENSOR_SPLIT={self.tensor_split!r} is not a list of proportions; "
                "fix: comma-separated numbers, e.g. 3,1"
            )

    def worker_name(self, index: int) -> str:
        """How a failure names the worker behind `--rpc` entry `index`."""
        endpoint = self.rpc_servers[index]
        if index < len(self.rpc_nodes):
            return f"worker node {self.rpc_nodes[index]} (RPC {endpoint})"
        return f"worker RPC {endpoint}"


def _csv(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"MVP_RPC_SERVERS entry {endpoint!r} is not host:port; fix: e.g. 127.0.0.1:50052"
        )
    return host, int(port)


def _split_tunnel(tunnel: str) -> tuple[str, str, int]:
    """`user@host:port` → (user, host, port): how the main node reaches a worker's sshd."""
    user, at, rest = tunnel.partition("@")
    host, sep, port = rest.rpartition(":")
    if not at or not user or not sep or not host or not port.isdigit():
        raise ConfigError(
            f"MVP_RPC_TUNNELS entry {tunnel!r} is not user@host:port; fix: e.g. root@1.2.3.4:22"
        )
    return user, host, int(port)


def find_engine_binary(name: str, bin_dir: str) -> str:
    """The path of a llama.cpp binary: MVP_RPC_BIN_DIR first, then PATH."""
    if bin_dir:
        candidate = os.path.join(os.path.expanduser(bin_dir), name)
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return found
    where = f"MVP_RPC_BIN_DIR={bin_dir} or PATH" if bin_dir else "PATH"
    raise PhaseFailed(f"this node cannot take its role: {name} is not in {where}", fix=RPC_BIN_FIX)


def rpc_reachable(endpoint: str, timeout: float = RPC_PROBE_TIMEOUT_S) -> bool:
    """A TCP connect to a worker (harmless: the server reads EOF and waits for the next)."""
    host, port = _split_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout):
            return True
    except OSError:
        return False


def parse_buffer_line(text: str) -> tuple[str, float] | None:
    """(device, MiB) from a `model buffer size` log line; the device of an RPC buffer is its
    endpoint ("127.0.0.1:50052"), any other keeps its name ("CPU_Mapped")."""
    match = _BUFFER_LINE.search(text)
    if match is None:
        return None
    name, endpoint, mib = match.groups()
    return (endpoint if endpoint and name.startswith("RPC") else name), float(mib)


class RpcWorkerEngine(Engine):
    # A queued client that leaves would kill ggml-rpc-server with SIGPIPE.
    restore_signals = False

    def stop(self, timeout: float) -> dict[str, Any]:
        # A frozen (SIGSTOPped) server only acts on SIGTERM once it runs again.
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGCONT)
        return super().stop(timeout)


class WorkerAgent(Agent):
    """A worker node: ggml-rpc-server on loopback, reported once it accepts connections."""

    def __init__(self, *args: Any, role: RoleSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.role = role
        self.endpoint = ""

    def run(self) -> int:
        s = self.settings
        try:
            self._phase("config", lambda: {**s.summary(self.env), "role": ROLE_WORKER})
            if self.watchdog is not None:
                self.watchdog.report_verdict()
            self._phase("probe", lambda: probe_environment(s, serves=False))
            self._phase("engine_start", self._start_rpc_server)
            if self.role.tunnel_pubkey:  # before it is reported: the main tunnels right away
                self._phase("rpc_authorize", self._authorize_tunnel)
            self._phase("engine_health", self._wait_listening)
            return self._watch()
        except Interrupted:
            return self._shutdown()
        except PhaseFailed as failure:
            return self.fail(failure)

    def _start_rpc_server(self) -> dict[str, Any]:
        binary = find_engine_binary(RPC_SERVER_BIN, self.role.bin_dir)
        port = self.role.rpc_port or pick_free_port()
        threads = self.settings.engine_threads or 1
        argv = [binary, "-H", RPC_HOST, "-p", str(port), "-t", str(threads)]
        spec = EngineSpec(RPC_SERVER_BIN, argv, "", port)
        self.endpoint = f"{RPC_HOST}:{port}"
        engine = RpcWorkerEngine(spec, self.emitter, self.control)
        self.engine = engine
        env = {k: v for k, v in self.env.items() if not is_secret_name(k)}
        pid = engine.start(env, _engine_cwd(self.settings.cache_dir))
        return {"engine": RPC_SERVER_BIN, "pid": pid, "port": port, "argv": argv}

    def _wait_listening(self) -> dict[str, Any]:
        assert self.engine is not None
        started = time.monotonic()
        deadline = started + self.settings.ready_timeout_s
        while not rpc_reachable(self.endpoint):
            if time.monotonic() >= deadline:
                raise PhaseFailed(
                    f"{RPC_SERVER_BIN} did not listen on {self.endpoint} within "
                    f"{self.settings.ready_timeout_s:g} s",
                    fix="raise MVP_ENGINE_READY_TIMEOUT_S or read the engine log channel",
                    detail={"last_log_lines": list(self.engine.last_lines)},
                )
            event = self.control.wait(0.05)
            if self.control.stop_requested:
                raise Interrupted()
            if event is not None and event[0] == Control.ENGINE_EXIT:
                raise self._engine_died(event[1], "before it listened")
        load_ms = _ms_since(started)
        proc = self.engine.proc
        self.emitter.weights(
            RPC_SERVER_READY,
            endpoint=self.endpoint,
            port=self.engine.spec.port,
            engine=RPC_SERVER_BIN,
            engine_pid=proc.pid if proc else None,
            load_ms=load_ms,
        )
        return {"endpoint": self.endpoint, "load_ms": load_ms}

    def _tunnel_line(self) -> str:
        # Port forwarding to this RPC port only: no shell, no pty, no other port.
        port = self.endpoint.rpartition(":")[2]
        options = f'restrict,port-forwarding,permitopen="{RPC_HOST}:{port}",command="/bin/false"'
        return f"{options} {self.role.tunnel_pubkey}"

    def _authorize_tunnel(self) -> dict[str, Any]:
        path = Path(self.role.authorized_keys)
        try:
            edit_authorized_keys(path, add=self._tunnel_line())
        except OSError as exc:
            raise PhaseFailed(
                f"cannot authorize the run's tunnel key in {path}: {exc.strerror or exc}",
                fix="make ~/.ssh/authorized_keys writable on the worker, or set "
                "MVP_RPC_AUTHORIZED_FILE",
            ) from None
        return {"authorized_keys": str(path), "permitopen": self.endpoint}

    def stop_engine(self) -> dict[str, Any]:
        if self.role.tunnel_pubkey and self.endpoint:
            with contextlib.suppress(OSError):
                edit_authorized_keys(Path(self.role.authorized_keys), remove=self._tunnel_line())
        return super().stop_engine()

    def _engine_died(self, code: int | None, when: str) -> PhaseFailed:
        failure = super()._engine_died(code, when)
        failure.reason = (
            f"worker node {self.settings.node_id} ({RPC_SERVER_BIN} on {self.endpoint}): "
            f"{failure.reason}"
        )
        failure.detail["worker_node"] = self.settings.node_id
        return failure


def edit_authorized_keys(path: Path, *, add: str = "", remove: str = "") -> None:
    """Add or remove one line of an authorized_keys file, written atomically, mode 0600."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        lines = []
    kept = [line for line in lines if not remove or line != remove]
    if add and add not in kept:
        kept.append(add)
    if kept == lines:
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.mvp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("".join(f"{line}\n" for line in kept))
    os.replace(tmp, path)


def _engine_cwd(cache_dir: Path) -> Path:
    return cache_dir if cache_dir.is_dir() else Path.cwd()


class MainAgent(Agent):
    """The main node: llama-server with `--rpc` over the workers; ready only once its log
    shows model buffers on every worker (the "offloaded N/N layers" line is printed even
    when everything stayed here)."""

    def __init__(self, *args: Any, role: RoleSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.role = role
        self.tunnels = Tunnels(self.emitter, self.settings.cache_dir)
        self.placement: dict[str, float] = {}
        # Notified per buffer line: the log is read by another thread, which may still be
        # behind when /health already answers (the lines come before the port opens).
        self._placement_lock = threading.Condition()

    def _gate_wanted(self) -> bool:
        return False  # multi-node: llama-server binds the port itself (no key, no idle stop)

    def _start_engine(self, model: Path) -> dict[str, Any]:
        role = self.role
        binary = find_engine_binary(LLAMA_SERVER_BIN, role.bin_dir)
        if role.tunnels:
            role.rpc_servers = self.tunnels.open(role)
        s = self.settings
        port = s.engine_port or pick_free_port()
        argv = [binary, "-m", str(model), "--host", s.engine_host, "--port", str(port)]
        argv += ["-a", self._alias(), "--rpc", ",".join(role.rpc_servers)]
        # -lv 4: the load log (the per-device `model buffer size` lines) is info level 4.
        argv += ["-ngl", str(role.gpu_layers), "-lv", "4"]
        argv += ["--tensor-split", role.tensor_split] if role.tensor_split else []
        argv += ["-c", str(s.max_context)] if s.max_context else []
        argv += ["-t", str(s.engine_threads)] if s.engine_threads else []
        for index, endpoint in enumerate(role.rpc_servers):
            if not rpc_reachable(endpoint):
                raise PhaseFailed(
                    f"{role.worker_name(index)} does not answer: llama-server would abort",
                    fix="read that worker's channels (mvp.node.<id>.agent) for why",
                    detail={"worker": endpoint},
                )
        spec = EngineSpec(LLAMA_SERVER_BIN, argv, "/health", port)
        engine = Engine(spec, self.emitter, self.control)
        engine.on_line = self._on_engine_line
        self.engine = engine
        env = {k: v for k, v in self.env.items() if not is_secret_name(k)}
        pid = engine.start(env, model.parent if model.parent.is_dir() else Path.cwd())
        return {"engine": spec.kind, "pid": pid, "port": port, "argv": argv, "role": ROLE_MAIN}

    def stop_engine(self) -> dict[str, Any]:
        detail = super().stop_engine()
        self.tunnels.close()
        return detail

    def _on_engine_line(self, text: str) -> None:
        parsed = parse_buffer_line(text)
        if parsed is not None:
            device, mib = parsed
            with self._placement_lock:
                self.placement[device] = self.placement.get(device, 0.0) + mib
                self._placement_lock.notify_all()

    def _missing_workers(self) -> list[str]:
        return [
            self.role.worker_name(i)
            for i, endpoint in enumerate(self.role.rpc_servers)
            if self.placement.get(endpoint, 0.0) <= 0.0
        ]

    def _report_loaded(self, kind: str, **fields: Any) -> None:
        with self._placement_lock:
            # Bounded: the log reader catches up in well under this on a loaded machine.
            self._placement_lock.wait_for(lambda: not self._missing_workers(), PLACEMENT_GRACE_S)
            placement = dict(self.placement)
            missing = self._missing_workers()
        if missing:
            raise PhaseFailed(
                f"llama-server serves, but its log shows no model buffer on {', '.join(missing)}: "
                "the layers stayed on the main node",
                fix="check -ngl / MVP_TENSOR_SPLIT and the workers' devices",
                detail={"placement_mib": placement},
            )
        self.emitter.weights(kind, **fields, placement_mib=placement, role=ROLE_MAIN)

    def _engine_died(self, code: int | None, when: str) -> PhaseFailed:
        failure = super()._engine_died(code, when)
        lost = [
            self.role.worker_name(i)
            for i, endpoint in enumerate(self.role.rpc_servers)
            if not rpc_reachable(endpoint)
        ]
        if lost:
            failure.reason = f"lost {', '.join(lost)}: {failure.reason}"
            failure.detail["lost_workers"] = lost
        return failure


class Tunnels:
    """`ssh -N -L` from the main node to each worker's loopback RPC port, with the run's key
    (written 0600 for ssh, removed at exit) and the workers' pinned host keys."""

    def __init__(self, emitter: Emitter, cache_dir: Path) -> None:
        self.emitter = emitter
        self.dir = cache_dir / f"tunnels-{os.getpid()}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def open(self, role: RoleSettings) -> list[str]:
        """The local endpoints that reach the workers, in `--rpc` order."""
        ssh = shutil.which("ssh")
        if ssh is None:
            raise PhaseFailed(
                "this main node has remote workers but no ssh client (ssh is not on PATH)",
                fix="use an image with openssh-client installed",
            )
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = self.dir / "id"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(role.tunnel_key.strip() + "\n")
        known = self.dir / "known_hosts"
        known.write_text(role.known_hosts.strip() + "\n")
        local = []
        for index, (tunnel, target) in enumerate(zip(role.tunnels, role.rpc_servers, strict=True)):
            user, host, port = _split_tunnel(tunnel)
            local_port = pick_free_port()
            argv = [ssh, "-N", "-T", "-i", str(key), "-p", str(port),
                    "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                    "-o", "ExitOnForwardFailure=yes", "-o", "StrictHostKeyChecking=yes",
                    "-o", f"UserKnownHostsFile={known}", "-o", "ServerAliveInterval=5",
                    "-L", f"{ENGINE_HOST}:{local_port}:{target}", f"{user}@{host}"]  # fmt: skip
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, preexec_fn=_die_with_parent_hook(),
            )  # fmt: skip
            self.procs.append(proc)
            endpoint = f"{ENGINE_HOST}:{local_port}"
            self._wait(proc, endpoint, role.worker_name(index))
            local.append(endpoint)
        return local

    def _wait(self, proc: subprocess.Popen[bytes], endpoint: str, name: str) -> None:
        deadline = time.monotonic() + 30.0
        while not rpc_reachable(endpoint):
            if proc.poll() is not None or time.monotonic() >= deadline:
                err = (
                    proc.stderr.read().decode("utf-8", "replace")
                    if proc.poll() is not None and proc.stderr
                    else ""
                )
                raise PhaseFailed(
                    f"the SSH tunnel to {name} did not open: "
                    f"{clean_text(err.strip(), 300, redact=self.emitter.redact) or 'timed out'}",
                    fix="check that the worker is up and authorized the run's tunnel key",
                )
            time.sleep(0.05)  # ssh has no readiness signal but its listening port

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)


def agent_for_role(
    env: Mapping[str, str],
    settings: Settings,
    emitter: Emitter,
    control: Control,
    watchdog: Watchdog | None,
) -> Agent:
    """The agent for MVP_NODE_ROLE; a bad role setting becomes an agent that fails its
    config phase (exit 2) with the reason."""
    try:
        role = RoleSettings(env)
    except ConfigError as exc:
        return _ConfigFailedAgent(env, settings, emitter, control, watchdog, error=exc)
    if role.role == ROLE_WORKER:
        return WorkerAgent(env, settings, emitter, control, watchdog, role=role)
    if role.role == ROLE_MAIN:
        return MainAgent(env, settings, emitter, control, watchdog, role=role)
    return Agent(env, settings, emitter, control, watchdog)


class _ConfigFailedAgent(Agent):
    def __init__(self, *args: Any, error: ConfigError, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.error = error

    def run(self) -> int:
        def refuse() -> dict[str, Any]:
            raise self.error

        try:
            self._phase("config", refuse)
        except PhaseFailed as failure:
            return self.fail(failure)
        return EXIT_CONFIG  # not reached: the phase always fails


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _install_signal_handlers(control: Control) -> None:
    def on_signal(signum: int, _frame: Any) -> None:
        control.request_stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if hasattr(signal, "SIGHUP"):
        # A dropped SSH session must not take the node down with it.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _start_thread(target: Callable[..., None], *args: Any) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()


def run_agent(env: Mapping[str, str], out_fd: int) -> int:
    """Runs the agent with this environment, writing frames to `out_fd`; returns the exit
    code."""
    redactor = Redactor(secret_values(env))
    try:
        settings = Settings(env)
    except ConfigError as exc:
        run_id = clean_text(env.get("MVP_RUN_ID", "").strip(), 64)
        emitter = Emitter(out_fd, redactor, run_id, _lenient_int(env.get("MVP_LOGICAL_NODE_ID")))
        emitter.phase("config", "failed", {"reason": str(exc)})
        emitter.weights(WORKER_FATAL, reason=str(exc), fix="", phase="config")
        emitter.phase("agent_exit", "failed", {"exit_code": EXIT_CONFIG, "reason": str(exc)})
        return EXIT_CONFIG
    emitter = Emitter(out_fd, redactor, settings.run_id, settings.node_id)
    control = Control()
    if threading.current_thread() is threading.main_thread():
        _install_signal_handlers(control)
    watchdog = Watchdog(env, WatchdogSettings(env), emitter, control, redactor)
    watchdog.start()  # the deadline and the silence count from the agent's start
    _start_thread(
        read_commands, 0, "stdin", control, emitter, settings.stdin_eof_shutdown, watchdog
    )
    fifo: tuple[int, bool] | None = None
    agent = agent_for_role(env, settings, emitter, control, watchdog)
    try:
        if settings.control_fifo:
            try:
                fifo = open_control_fifo(settings.control_fifo)
            except (ConfigError, OSError) as exc:
                return agent.fail(PhaseFailed(str(exc), exit_code=EXIT_CONFIG))
            _start_thread(read_commands, fifo[0], "fifo", control, emitter, False, watchdog)
        return agent.run()
    except Exception as exc:  # a bug: report it as a fatal node error, never hang
        emitter.stderr(f"mvp-node: internal error: {exc!r}")
        return agent.fail(PhaseFailed(f"internal error in mvp-node: {_name(exc)}: {exc}"))
    finally:
        watchdog.close()
        agent.stop_engine()
        if fifo is not None and fifo[1]:
            _unlink_quietly(settings.control_fifo)


def _name(exc: BaseException) -> str:
    return type(exc).__name__


def _lenient_int(raw: str | None) -> int:
    try:
        return int(raw or 0)
    except ValueError:
        return 0


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def main() -> int:
    """Console entry point (`mvp-node`); the wrapper exits with what this returns."""
    return run_agent(os.environ, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())

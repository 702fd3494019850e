"""Settings: everything the agent reads from its environment, parsed once."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mvp_tui.node.frames import clean_text

GGUF_MAGIC = b"GGUF"
ENGINE_HOST = "127.0.0.1"  # where the agent reaches its engine, and binds it by default
# ggml-rpc-server's bind, whatever MVP_ENGINE_HOST says: ggml RPC has no authentication and
# gives a client the process's memory, so a worker is reached only through the run's tunnel.
RPC_HOST = "127.0.0.1"
# MVP_ENGINE_HOST: loopback, or every interface where a published port must reach the engine
# (a Docker bridge container's eth0).
ENGINE_BIND_HOSTS = ("127.0.0.1", "0.0.0.0")
LAST_LINES_KEPT = 20
GATE_MAX_BODY_BYTES = 64 << 20  # the gate's cap on a request body: a chat with images fits
DEFAULT_HF_ENDPOINT = "https://huggingface.co"
DOWNLOAD_CHUNK = 1 << 20
PROGRESS_EVERY_S = 0.5

EXIT_OK = 0
EXIT_FATAL = 1
EXIT_CONFIG = 2

LOCAL_PATH_KEY = "[model] gguf_local_path (MVP_GGUF_LOCAL_PATH)"
# ---------------------------------------------------------------------------------------
# Settings


def _plain_http_off_loopback(url: str) -> bool:
    """Whether `url` is `http://` to a host other than loopback (mvp_tui/config/values.py has
    the app's twin; the node imports nothing of the app's config)."""
    import ipaddress

    if url[:7].lower() != "http://":
        return False
    netloc = url[7:].split("/", 1)[0].rpartition("@")[2]
    host = (netloc if netloc.endswith("]") else netloc.rsplit(":", 1)[0]).strip("[]")
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


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
        if self.hf_token and _plain_http_off_loopback(self.hf_endpoint):
            raise ConfigError(
                f"MVP_HF_ENDPOINT={self.hf_endpoint!r} is plain http to a host that is not "
                "loopback, and HF_TOKEN is set: the token would cross the network unencrypted; "
                "fix: use https (or unset MVP_HF_ENDPOINT for the hub)"
            )
        cache = env.get("MVP_MODEL_CACHE_DIR", "").strip()
        self.cache_dir = Path(cache).expanduser() if cache else Path.home() / ".cache/mvp-node"
        self.engine_port = _env_int(env, "MVP_ENGINE_PORT", 0, low=0, high=65535)
        # "1": MVP_ENGINE_PORT is a preference; taken, the gate serves on a free port instead.
        self.engine_port_fallback = env.get("MVP_ENGINE_PORT_FALLBACK", "").strip() == "1"
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
        self.gate_max_body = _env_int(env, "MVP_GATE_MAX_BODY_BYTES", GATE_MAX_BODY_BYTES, low=1)
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



"""Settings: everything the agent reads from its environment, parsed once."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mvp_tui.node.frames import clean_text
from mvp_tui.node_protocol import AgentEnv, NodeEnvError, base_url_problem, shown_url

GGUF_MAGIC = b"GGUF"
ENGINE_HOST = "127.0.0.1"  # where the agent reaches its engine, and binds it by default
# ggml-rpc-server's bind, whatever AgentEnv.engine_host says: ggml RPC has no authentication and
# gives a client the process's memory, so a worker is reached only through the run's tunnel.
RPC_HOST = "127.0.0.1"
LAST_LINES_KEPT = 20
GATE_MAX_BODY_BYTES = 64 << 20  # the gate's cap on a request body: a chat with images fits
DOWNLOAD_CHUNK = 1 << 20
PROGRESS_EVERY_S = 0.5

EXIT_OK = 0
EXIT_FATAL = 1
EXIT_CONFIG = 2

LOCAL_PATH_KEY = f"[model] gguf_local_path ({AgentEnv.env_name('gguf_local_path')})"
# ---------------------------------------------------------------------------------------
# Settings


# A setting the agent cannot use; names the key and the fix (the node env's own error, so one
# `except` takes both a bad variable and the checks below).
ConfigError = NodeEnvError


class Settings:
    """Everything the agent reads from its environment (`AgentEnv`), parsed once, with what
    follows from it."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = read = AgentEnv.from_env(env)
        # The dashboard's run id ("r-7f3a09c1"); opaque here, only echoed in records.
        self.run_id = clean_text(read.run_id, 64)
        self.node_id = read.node_id
        self.model_id = read.model_id
        self.gguf_local_path = read.gguf_local_path
        self.gguf_repo = read.gguf_repo
        self.gguf_file = read.gguf_file
        self.gguf_revision = read.gguf_revision
        self.hf_endpoint = read.hf_endpoint
        self.hf_token = env.get("HF_TOKEN", "") or env.get("HUGGING_FACE_HUB_TOKEN", "")
        hub = AgentEnv.env_name("hf_endpoint")
        if self.hf_token and base_url_problem(self.hf_endpoint, plain_http_ok=False):
            raise ConfigError(
                f"{hub}={shown_url(self.hf_endpoint)!r} is plain http to a host that is not "
                "loopback, and HF_TOKEN is set: the token would cross the network unencrypted; "
                f"fix: use https (or unset {hub} for the hub)"
            )
        cache = read.model_cache_dir
        self.cache_dir = Path(cache).expanduser() if cache else Path.home() / ".cache/mvp-node"
        verified = read.verified_dir
        self.verified_dir = (
            Path(verified).expanduser() if verified else Path.home() / ".cache/mvp-node-verified"
        )
        self.engine_port = read.engine_port
        self.engine_port_fallback = read.engine_port_fallback
        self.engine_host = read.engine_host
        self.max_context = read.max_context
        self.engine_threads = read.engine_threads
        self.engine_cmd = read.engine_cmd
        self.engine_kind = read.engine_kind
        self.vram_need_mib = read.vram_need_mib
        self.kv_slot_mib = read.kv_slot_mib
        self.parallel = read.parallel
        self.allow_partial_offload = read.allow_partial_offload
        # Kept from the engine's environment (a *KEY* name) but for LLAMA_API_KEY, set on
        # purpose.
        self.api_key = read.api_key
        self.gate_max_body = read.gate_max_body
        self.ready_timeout_s = read.ready_timeout_s
        self.stop_timeout_s = read.stop_timeout_s
        self.health_poll_s = read.health_poll_s
        self.download_retries = read.download_retries
        self.download_retry_delay_s = read.download_retry_delay_s
        self.download_floor_mbps = read.download_floor_mbps
        self.download_floor_window_s = read.download_floor_window_s
        self.control_fifo = read.control_fifo
        self.stdin_eof_shutdown = read.stdin_eof_shutdown
        if self.gguf_repo and not self.gguf_file:
            raise ConfigError(
                f"[model] gguf_repo ({AgentEnv.env_name('gguf_repo')}) is set but [model] "
                f"gguf_file ({AgentEnv.env_name('gguf_file')}) is empty; fix: name the .gguf "
                "file inside the repo"
            )

    def summary(self, env: Mapping[str, str]) -> dict[str, Any]:
        """What the config phase reports: sources and knobs, never a value of a secret."""
        source = "local" if self.gguf_local_path else ("hub" if self.gguf_repo else None)
        return {
            "model_id": self.model_id,
            "model_source": source,
            "engine_port": self.engine_port,
            "max_context": self.max_context,
            "parallel": self.parallel or "auto",
            "engine_cmd": bool(self.engine_cmd),
            "control_fifo": self.control_fifo or None,
            "env_keys": sorted(k for k in env if k.startswith("MVP_")),
            "hf_token": bool(self.hf_token),
            "api_key": bool(self.api_key),
        }

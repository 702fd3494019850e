"""The run's endpoint: the local OpenAI address, its key and the model, and the prompt RPC's
address and token, on disk beside the run record (`<state_dir>/runs/<run_id>/endpoint.json`,
mode 600 in a 700 directory).

The key is made once per run (`new_api_key`) and written here before the agent starts, so a
re-attach finds the key its agent checks, and `mvp-tui endpoint` can hand it to other tools.
It is never on a command line, in a log line, a frame or the run record's config.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import msgspec

from mvp_tui.lease.atomic import write_atomic
from mvp_tui.lease.records import RecordStore

ENDPOINT_FILE = "endpoint.json"
ENDPOINT_VERSION = 1


def new_api_key() -> str:
    """A per-run key: 256 random bits, URL-safe (fits a Bearer header and an env value)."""
    return "mvp-" + secrets.token_urlsafe(32)


def new_rpc_token() -> str:
    """The prompt RPC's per-run token: 256 random bits, of its own (it opens the RPC only,
    where the run's key opens the whole endpoint)."""
    return "mvp-rpc-" + secrets.token_urlsafe(32)


class EndpointRecord(msgspec.Struct, kw_only=True):
    """What a tool needs to use the run's model, and what the dashboard shows of it; the
    type is the file's schema (`save_endpoint`, `load_endpoint`)."""

    version: int = ENDPOINT_VERSION
    api_key: str
    base_url: str = ""  # http://127.0.0.1:PORT (no /v1); empty until the node serves
    model: str = ""
    auth: str = "key"  # "key" | "none": the node's gate checks the key, or nothing does
    idle_stop_mins: float | None = None  # the node's idle stop; None: off
    slots: int = 0  # requests the engine serves at once (1: one at a time); 0: unknown
    serving: bool = False  # the last the run knew: its node serves at base_url
    pid: int = 0  # the mvp-tui process whose forward carries base_url (it ends with it)
    rpc_token: str = ""  # the prompt RPC's token: each request line's `token` field
    rpc_addr: str = ""  # where that process serves the prompt RPC; empty: it does not
    updated_at: float = msgspec.field(default_factory=time.time)

    def __post_init__(self) -> None:
        # A hand-edited or unknown value reads as the safe one: the key checked, no idle stop.
        self.auth = "none" if self.auth == "none" else "key"
        if self.idle_stop_mins is not None and not self.idle_stop_mins > 0:
            self.idle_stop_mins = None

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1" if self.base_url else ""

    @property
    def port(self) -> int | None:
        tail = self.base_url.rsplit(":", 1)[-1]
        return int(tail) if tail.isdigit() else None


def process_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def endpoint_path(store: RecordStore, run_id: str) -> Path:
    return store.run_dir(run_id) / ENDPOINT_FILE


def save_endpoint(store: RecordStore, run_id: str, record: EndpointRecord) -> None:
    """Write atomically, mode 600; the run's directory must exist (it does once it leased)."""
    record.updated_at = time.time()
    record.pid = os.getpid()
    record.version = ENDPOINT_VERSION
    text = msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"
    write_atomic(endpoint_path(store, run_id), text)


def load_endpoint(store: RecordStore, run_id: str) -> EndpointRecord | None:
    """The run's endpoint, or None when it has none (an older run) or it cannot be read."""
    try:
        return _read(endpoint_path(store, run_id).read_bytes())
    except (OSError, msgspec.MsgspecError):
        return None


_read = msgspec.json.Decoder(EndpointRecord).decode

"""The node protocol's one home: the agent's channel names, its record types, and the parsers
the app reads its records with.

The node agent (mvp_tui/node/) writes frame lines (see datastream/frame_line.py) on
these channels; the engine (engine/node_watch.py, engine/cluster.py, engine/watchdog.py),
the Docker provider and the dashboard's panes (widgets/bootstrap_model.py, widgets/prompt.py)
read them. Everything here is standard library only.

The agent (the package `mvp_tui/node/`) imports this module: it ships to a node in the
agent's zipapp (`mvp_tui/node/build.py`) with the few other standard-library-only modules it
shares with the app, so there is one copy of every name and of the frame line's wire form.
tests/foundation/test_node_protocol.py fails when any other module types an
`"mvp.node.`/`"mvp.worker.` name or a record type's name itself.
"""

from __future__ import annotations

import json
from typing import Any

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

# The model prefetch (the instance's start command, before any agent exists) leaves the
# bytes in the cache file's `.part` and one line `<pid> <unix start> <tool>` beside it; the
# agent stops it and adopts the file. It runs only when the create env holds MVP_PREFETCH=1.
PREFETCH_ENV = "MVP_PREFETCH"
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

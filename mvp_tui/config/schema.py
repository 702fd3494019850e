"""Every configuration key: its section, type, default, env names, CLI flag and meaning.

This table is the one place a key is declared; the loader, `mvp-tui config`, the CLI flags and
the test that checks `config.example.toml` all read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    STR = "text"
    INT = "a whole number"
    FLOAT = "a number"
    BOOL = "1/0, true/false, yes/no, or on/off"
    PATH = "a file path (~/ expands to your home)"
    ADDR = "an address HOST:PORT, e.g. 127.0.0.1:19777 (loopback unless acknowledged)"
    CHOICE = "one of"
    LIST = "a list of names (TOML array, or comma-separated in env and flags)"
    FLOAT_LIST = "a list of numbers (TOML array, or comma-separated in env and flags)"
    RUN_ID = "a whole number (the seed's run ids) or 'r-' and 1-32 lowercase letters or digits"


class Scope(Enum):
    """Which provider a key belongs to: its value is parsed only when that provider runs."""

    ALL = "all"
    VASTAI = "vastai"
    RUNPOD = "runpod"
    DOCKER = "docker"


PROVIDERS = ("local", "docker", "vastai", "runpod")
PROFILES = ("local", "deploy")
PROFILE_PROVIDER = {"local": "local", "deploy": "vastai"}


@dataclass(frozen=True, slots=True)
class KeySpec:
    section: str
    name: str
    kind: Kind
    default: object
    doc: str
    env: tuple[str, ...] = ()
    flag: str | None = None
    secret: bool = False
    scope: Scope = Scope.ALL
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # the value must be greater than this (a 0 has no meaning)
    min_items: int = 0  # a list needs at least this many items
    zero_is_unset: bool = False  # a 0 means the same as leaving the key unset (no limit)
    # Accepted for the seed's config files but not built here: a value other than the
    # default gets one warning line saying so, and why (never an error).
    inert: str = ""

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def label(self) -> str:
        return f"[{self.section}] {self.name}"

    def accepted(self) -> str:
        """The accepted forms, as an error message states them."""
        if self.kind is Kind.CHOICE:
            return "one of " + ", ".join(self.choices)
        text: str = self.kind.value
        if self.nonempty:
            text = "non-empty " + text
        if self.minimum is not None and self.maximum is not None:
            text += f" from {_num(self.minimum)} to {_num(self.maximum)}"
        elif self.minimum is not None:
            text += f" ≥ {_num(self.minimum)}"
        elif self.above is not None:
            text += f" > {_num(self.above)}"
        if self.min_items:
            text += f", at least {self.min_items}"
        return text

    @property
    def nonempty(self) -> bool:
        """Text with a built-in default cannot be empty (leaving the key out gives the
        default); empty text for an optional key means unset."""
        return self.kind is Kind.STR and self.default is not None


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _k(section: str, name: str, kind: Kind, default: object, doc: str, **rest: object) -> KeySpec:
    return KeySpec(section, name, kind, default, doc, **rest)  # type: ignore[arg-type]


DEFAULT_HF_REPO = "bartowski/Llama-3.2-1B-Instruct-GGUF"
DEFAULT_HF_FILE = "Llama-3.2-1B-Instruct-Q4_K_M.gguf"
DEFAULT_MODEL_ID = "llama-3.2-1b-instruct-q4"
DEFAULT_IMAGE = "mvp-node:latest"
# What a rented node runs when neither [image] node nor the provider's image is set: llama.cpp's
# own CUDA image (python3 for the agent; llama-server at /app/llama-server, not on PATH, which
# the agent knows). DEFAULT_IMAGE is the seed's name for a locally built image.
RENTED_IMAGE = "ghcr.io/ggml-org/llama.cpp:full-cuda"
DEFAULT_RPC_ADDR = "127.0.0.1:19777"

S, V, R, D = Scope.ALL, Scope.VASTAI, Scope.RUNPOD, Scope.DOCKER

WHOLE_MODEL = (
    "this engine (llama.cpp) serves the whole model on one node; pipeline stages are not built"
)
NO_IROH = "mvp-tui reaches nodes over SSH; the seed's iroh relay is not built"
NO_WEB_DASHBOARD = (
    "the seed's web dashboard is not built; run `mvp-tui` for the terminal dashboard "
    "(headless runs print every frame as a JSON line)"
)

KEYS: tuple[KeySpec, ...] = (
    # [runtime]
    _k(
        "runtime",
        "profile",
        Kind.CHOICE,
        "local",
        "local leases this machine; deploy rents a GPU",
        env=("MVP_RUNTIME_CONFIG",),
        flag="--runtime-config",
        choices=PROFILES,
    ),
    _k(
        "runtime",
        "run_id",
        Kind.RUN_ID,
        None,
        "run id; unset = a new unique id per run (a seed config's number, e.g. 41, works too)",
        env=("MVP_RUN_ID",),
        flag="--run-id",
    ),
    _k(
        "runtime",
        "node_id",
        Kind.INT,
        1,
        "logical node id (labels, channels)",
        env=("MVP_LOGICAL_NODE_ID",),
        flag="--node-id",
        minimum=1,
    ),
    _k(
        "runtime",
        "stage_index",
        Kind.INT,
        0,
        "pipeline stage served by this node",
        env=("MVP_STAGE_INDEX",),
        flag="--stage-index",
        minimum=0,
        inert=WHOLE_MODEL,
    ),
    _k(
        "runtime",
        "layer_end_exclusive",
        Kind.INT,
        16,
        "last layer (exclusive) of this stage",
        env=("MVP_LAYER_END_EXCLUSIVE",),
        flag="--layer-end-exclusive",
        minimum=1,
        inert=WHOLE_MODEL,
    ),
    _k(
        "runtime",
        "nodes",
        Kind.INT,
        1,
        "nodes serving one model together: a main node and workers (llama.cpp RPC)",
        env=("MVP_NODES",),
        flag="--nodes",
        minimum=1,
        maximum=8,
    ),
    _k(
        "runtime",
        "local_rpc_unauthenticated",
        Kind.BOOL,
        False,
        "let nodes > 1 run on provider local: its workers' ggml-rpc-server listens on this "
        "machine's loopback with NO authentication, so any local user can read and write "
        "that process's memory (rented nodes are the safe mode)",
        env=("MVP_LOCAL_RPC_UNAUTHENTICATED",),
        flag="--local-rpc-unauthenticated",
    ),
    _k(
        "runtime",
        "node_stages",
        Kind.LIST,
        [],
        "each node's stage as stage_index:layer_end_exclusive, main node first; "
        "empty = split by the workers' memory",
        env=("MVP_NODE_STAGES",),
        flag="--node-stages",
    ),
    _k(
        "runtime",
        "node_python",
        Kind.STR,
        "python3",
        "Python interpreter that runs the node agent on the node",
        env=("MVP_NODE_PYTHON",),
        flag="--node-python",
    ),
    _k(
        "runtime",
        "node_dir",
        Kind.STR,
        "/tmp/mvp-node",
        "directory on the node for the agent, its logs and env file (one subdirectory per run)",
        env=("MVP_NODE_DIR",),
        flag="--node-dir",
    ),
    # [provider]
    _k(
        "provider",
        "kind",
        Kind.CHOICE,
        None,
        "provider; unset = chosen by the profile",
        env=("MVP_NODE_PROVIDER", "MVP_PROVIDER"),
        flag="--provider",
        choices=PROVIDERS,
    ),
    # [image]
    _k(
        "image",
        "node",
        Kind.STR,
        DEFAULT_IMAGE,
        "container image of the node; unset on vastai/runpod = " + RENTED_IMAGE,
        env=("MVP_NODE_IMAGE",),
        flag="--image",
    ),
    _k(
        "image",
        "size_gb",
        Kind.FLOAT,
        0.0,
        "the node image's download size in GB: Vast bills image pulls per GB, so the board's "
        "$/h (the first hour's) counts it in; 0 = not counted",
        env=("MVP_IMAGE_SIZE_GB",),
        flag="--image-size-gb",
        minimum=0,
    ),
    # [prompt]
    _k(
        "prompt",
        "rpc_addr",
        Kind.ADDR,
        DEFAULT_RPC_ADDR,
        "JSON-lines prompt RPC address; loopback unless [prompt] rpc_allow_remote = true",
        env=("MVP_PROMPT_RPC_BIND",),
        flag="--rpc-bind",
    ),
    _k(
        "prompt",
        "max_tokens",
        Kind.INT,
        64,
        "default max tokens per prompt",
        env=("MVP_PROMPT_MAX_TOKENS",),
        flag="--max-tokens",
        minimum=1,
    ),
    _k(
        "prompt",
        "rpc_allow_remote",
        Kind.BOOL,
        False,
        "let rpc_addr be a non-loopback address; the prompt RPC has NO authentication, so "
        "anyone who can reach that address can prompt (and spend) your node",
        env=("MVP_PROMPT_RPC_ALLOW_REMOTE",),
        flag="--rpc-bind-unauthenticated",
    ),
    _k(
        "prompt",
        "dashboard",
        Kind.BOOL,
        False,
        "the seed's web dashboard (accepted, not built: the terminal UI is the dashboard)",
        env=("MVP_DASHBOARD",),
        flag="--dashboard",
        inert=NO_WEB_DASHBOARD,
    ),
    _k(
        "prompt",
        "dashboard_port",
        Kind.INT,
        None,
        "the seed's web dashboard port (accepted, not built)",
        env=("MVP_DASHBOARD_PORT",),
        minimum=0,
        maximum=65535,
        inert=NO_WEB_DASHBOARD,
    ),
    # [relay]: the seed's iroh relay; nodes are reached over SSH here.
    _k(
        "relay",
        "mode",
        Kind.STR,
        None,
        "the seed's iroh relay mode (accepted, not built)",
        env=("MVP_IROH_RELAY_MODE",),
        flag="--relay-mode",
        inert=NO_IROH,
    ),
    _k(
        "relay",
        "url",
        Kind.STR,
        None,
        "the seed's iroh relay URL (accepted, not built)",
        env=("MVP_IROH_RELAY_URL",),
        flag="--relay-url",
        inert=NO_IROH,
    ),
    _k(
        "prompt",
        "stall_secs",
        Kind.FLOAT,
        60.0,
        "fail the run when no token arrives this long while a prompt runs (a frozen node); "
        "0 = never",
        env=("MVP_PROMPT_STALL_SECS",),
        flag="--stall-secs",
        minimum=0,
        zero_is_unset=True,
    ),
    # [model]
    _k(
        "model",
        "id",
        Kind.STR,
        DEFAULT_MODEL_ID,
        "model name served by the engine",
        env=("MVP_MODEL_ID",),
        flag="--model-id",
    ),
    _k(
        "model",
        "gguf_local_path",
        Kind.PATH,
        None,
        "GGUF file on the node (wins over the hub)",
        env=("MVP_GGUF_LOCAL_PATH",),
        flag="--gguf-local-path",
    ),
    _k(
        "model",
        "gguf_repo",
        Kind.STR,
        DEFAULT_HF_REPO,
        "Hugging Face repo of the GGUF",
        env=("MVP_GGUF_REPO",),
        flag="--gguf-repo",
    ),
    _k(
        "model",
        "gguf_file",
        Kind.STR,
        DEFAULT_HF_FILE,
        "GGUF file in that repo",
        env=("MVP_GGUF_FILE",),
        flag="--gguf-file",
    ),
    _k(
        "model",
        "gguf_revision",
        Kind.STR,
        None,
        "repo revision (branch, tag or commit)",
        env=("MVP_GGUF_REVISION",),
        flag="--gguf-revision",
    ),
    _k(
        "model",
        "tokenizer_local_path",
        Kind.PATH,
        None,
        "tokenizer file; unset = the GGUF's own",
        env=("MVP_TOKENIZER_LOCAL_PATH",),
        flag="--tokenizer-local-path",
        inert="llama.cpp reads the tokenizer embedded in the GGUF file; this engine serves the "
        "whole model from that one file",
    ),
    _k(
        "model",
        "download_floor_mbps",
        Kind.FLOAT,
        20.0,
        "a model download slower than this (Mbit/s) for a whole window is the host's failure: "
        "it is destroyed and the next offer tried; 0 = no floor",
        env=("MVP_DOWNLOAD_FLOOR_MBPS",),
        flag="--download-floor-mbps",
        minimum=0,
    ),
    _k(
        "model",
        "download_floor_window_secs",
        Kind.FLOAT,
        90.0,
        "the window over which [model] download_floor_mbps is measured",
        env=("MVP_DOWNLOAD_FLOOR_WINDOW_SECS",),
        flag="--download-floor-window-secs",
        minimum=5,
    ),
    _k(
        "model",
        "max_context",
        Kind.INT,
        None,
        "context length; unset = the engine's default",
        env=("MVP_MAX_CONTEXT",),
        flag="--max-context",
        minimum=16,
    ),
    _k(
        "prompt",
        "openai_port",
        Kind.INT,
        8642,
        "local port where the node's OpenAI-compatible endpoint is offered (one address for "
        "every run; taken: another, with a warning); 0 = pick a free one",
        env=("MVP_PROMPT_OPENAI_PORT",),
        flag="--openai-port",
        minimum=0,
        maximum=65535,
    ),
    # [lease]
    _k(
        "lease",
        "label_prefix",
        Kind.STR,
        "mvp",
        "prefix of every instance label: PREFIX-RUN-NODE-ATTEMPT",
        env=("MVP_LEASE_LABEL_PREFIX",),
        flag="--label-prefix",
    ),
    _k(
        "lease",
        "reconcile_waits_secs",
        Kind.FLOAT_LIST,
        [5.0, 15.0],
        "after an unclear create, look the instance up by label after each of these waits "
        "(seconds; at least one: an instance that may bill is always looked for)",
        env=("MVP_LEASE_RECONCILE_WAITS_SECS",),
        flag="--reconcile-waits-secs",
        minimum=0,
        min_items=1,
    ),
    _k(
        "lease",
        "ready_timeout_secs",
        Kind.FLOAT,
        900.0,
        "a created instance not running with SSH by then is destroyed and the next offer tried",
        env=("MVP_LEASE_READY_TIMEOUT_SECS",),
        flag="--ready-timeout-secs",
        minimum=1,
    ),
    _k(
        "lease",
        "delete_timeout_secs",
        Kind.FLOAT,
        120.0,
        "how long to wait for the provider to confirm a delete before reporting it unconfirmed",
        env=("MVP_LEASE_DELETE_TIMEOUT_SECS",),
        flag="--delete-timeout-secs",
        minimum=1,
    ),
    _k(
        "lease",
        "destroy_backoff_secs",
        Kind.FLOAT,
        1.0,
        "the wait after a refused destroy before asking again (doubles each time, up to 16x "
        "this); after 6 refusals the delete is reported unconfirmed",
        env=("MVP_LEASE_DESTROY_BACKOFF_SECS",),
        flag="--destroy-backoff-secs",
        above=0,
    ),
    _k(
        "lease",
        "max_attempts",
        Kind.INT,
        5,
        "Enter without picks tries the focused offer, then the next ones in the board's sort "
        "order, up to this many offers",
        env=("MVP_LEASE_MAX_ATTEMPTS",),
        flag="--max-attempts",
        minimum=1,
    ),
    _k(
        "lease",
        "on_node_loss",
        Kind.CHOICE,
        "replace",
        "a node that dies (before or while serving) is destroyed, confirmed, and the next "
        "offer brought up in its place ('replace'), or the run stops ('stop')",
        env=("MVP_LEASE_ON_NODE_LOSS",),
        flag="--on-node-loss",
        choices=("replace", "stop"),
    ),
    _k(
        "lease",
        "same_failure_limit",
        Kind.INT,
        3,
        "the same host failure on this many hosts in a row stops the run (it is not the hosts)",
        env=("MVP_LEASE_SAME_FAILURE_LIMIT",),
        flag="--same-failure-limit",
        minimum=1,
    ),
    _k(
        "lease",
        "avoid_failed_hosts_days",
        Kind.FLOAT,
        7.0,
        "offers on a host where an attempt failed within this many days are badged and tried "
        "after the others (still pickable by hand); 0 = no host memory",
        env=("MVP_LEASE_AVOID_FAILED_HOSTS_DAYS",),
        flag="--avoid-failed-hosts-days",
        minimum=0,
    ),
    # [ssh]
    _k(
        "ssh",
        "retry_initial_secs",
        Kind.FLOAT,
        1.0,
        "first SSH retry back-off in seconds (doubles each try)",
        env=("MVP_SSH_RETRY_INITIAL_SECS",),
        flag="--ssh-retry-initial-secs",
        above=0,
    ),
    _k(
        "ssh",
        "retry_max_secs",
        Kind.FLOAT,
        30.0,
        "SSH retry back-off cap in seconds",
        env=("MVP_SSH_RETRY_MAX_SECS",),
        flag="--ssh-retry-max-secs",
        above=0,
    ),
    _k(
        "ssh",
        "ready_timeout_secs",
        Kind.FLOAT,
        600.0,
        "give up bootstrapping (and destroy the lease) when the node is not ready by then",
        env=("MVP_SSH_READY_TIMEOUT_SECS",),
        flag="--ssh-ready-timeout-secs",
        minimum=1,
    ),
    _k(
        "ssh",
        "connect_timeout_secs",
        Kind.FLOAT,
        15.0,
        "one SSH connect attempt's timeout",
        env=("MVP_SSH_CONNECT_TIMEOUT_SECS",),
        flag="--ssh-connect-timeout-secs",
        minimum=1,
    ),
    # [docker]
    _k(
        "docker",
        "gpus",
        Kind.STR,
        "all",
        "GPUs given to the node container (docker --gpus)",
        env=("MVP_DOCKER_GPUS",),
        flag="--gpus",
        scope=D,
    ),
    _k(
        "docker",
        "cached_model_host_path",
        Kind.PATH,
        None,
        "host GGUF mounted into the container (provider docker only)",
        env=("MVP_CACHED_MODEL_HOST_PATH",),
        flag="--cached-model-host-path",
        scope=D,
    ),
    _k(
        "docker",
        "image",
        Kind.STR,
        None,
        "node image for provider docker (must hold python3 and an engine); unset = [image] node",
        env=("MVP_DOCKER_IMAGE",),
        flag="--docker-image",
        scope=D,
    ),
    _k(
        "docker",
        "network",
        Kind.CHOICE,
        "bridge",
        "how the engine port reaches mvp-tui: bridge publishes it on 127.0.0.1 (random port), "
        "host shares this machine's network",
        env=("MVP_DOCKER_NETWORK",),
        flag="--docker-network",
        scope=D,
        choices=("bridge", "host"),
    ),
    # [observability]
    _k(
        "observability",
        "datastream_frame_log",
        Kind.PATH,
        None,
        "archive every datastream frame to this JSONL file",
        env=("MVP_DATASTREAM_FRAME_LOG",),
        flag="--datastream-frame-log",
    ),
    # [vastai]
    _k(
        "vastai",
        "api_key",
        Kind.STR,
        None,
        "Vast.ai API key (secret)",
        env=("MVP_VASTAI_API_KEY", "VASTAI_API_KEY", "VAST_API_KEY"),
        flag="--vastai-api-key",
        secret=True,
        scope=V,
    ),
    _k(
        "vastai",
        "api_key_file",
        Kind.PATH,
        None,
        "file holding the Vast.ai API key (keeps it out of ps and shell history); used "
        "unless api_key is set in the same or a later layer",
        env=("MVP_VASTAI_API_KEY_FILE", "VASTAI_API_KEY_FILE"),
        flag="--vastai-api-key-file",
        scope=V,
    ),
    _k(
        "vastai",
        "api_url",
        Kind.STR,
        "https://console.vast.ai",
        "Vast.ai API base URL",
        env=("MVP_VASTAI_API_URL", "VAST_URL"),
        flag="--vastai-api-url",
        scope=V,
    ),
    _k(
        "vastai",
        "image",
        Kind.STR,
        None,
        "node image on Vast.ai; unset = [image] node",
        env=("MVP_VASTAI_IMAGE",),
        flag="--vastai-image",
        scope=V,
    ),
    _k(
        "vastai",
        "bootstrap_command",
        Kind.STR,
        None,
        "command run over SSH on the node once the node agent is set up and started (in its "
        "run directory, with its environment); a non-zero exit fails the bring-up",
        env=("MVP_VASTAI_BOOTSTRAP_COMMAND",),
        flag="--vastai-bootstrap-command",
        scope=V,
    ),
    _k(
        "vastai",
        "disk_gb",
        Kind.INT,
        50,
        "disk size in GB",
        env=("MVP_VASTAI_DISK_GB",),
        flag="--vastai-disk-gb",
        scope=V,
        minimum=8,
    ),
    _k(
        "vastai",
        "ssh_user",
        Kind.STR,
        "root",
        "SSH user on the node",
        env=("MVP_VASTAI_SSH_USER",),
        flag="--vastai-ssh-user",
        scope=V,
    ),
    _k(
        "vastai",
        "pin_host_key",
        Kind.BOOL,
        True,
        "make each instance's SSH host key here and pin it before create (its onstart installs "
        "it); false: the first connection trusts the key that answers",
        env=("MVP_VASTAI_PIN_HOST_KEY",),
        flag="--vastai-pin-host-key",
        scope=V,
    ),
    _k(
        "vastai",
        "confirm_lease",
        Kind.BOOL,
        True,
        "ask before renting: the dashboard asks unless this is false; headless runs need "
        "--yes unless this is false",
        env=("MVP_VASTAI_CONFIRM_LEASE",),
        flag="--vastai-confirm-lease",
        scope=V,
    ),
    _k(
        "vastai",
        "onstart",
        Kind.STR,
        None,
        "onstart script run by Vast.ai after mvp-tui's boot guard (not the bootstrap); with the "
        "guard it must fit Vast's 4096 characters (about 2,000 left)",
        env=("MVP_VASTAI_ONSTART",),
        flag="--vastai-onstart",
        scope=V,
    ),
    _k(
        "vastai",
        "ssh_identity",
        Kind.PATH,
        "~/.ssh/id_ed25519",
        "SSH private key for nodes",
        env=("MVP_VASTAI_SSH_IDENTITY",),
        flag="--vastai-ssh-identity",
        scope=V,
    ),
    _k(
        "vastai",
        "gpu_name",
        Kind.STR,
        None,
        "GPU model, e.g. RTX 4090; unset = any",
        env=("MVP_VASTAI_GPU_NAME",),
        flag="--vastai-gpu-name",
        scope=V,
    ),
    _k(
        "vastai",
        "min_gpu_ram_mb",
        Kind.INT,
        None,
        "minimum VRAM per GPU in MB",
        env=("MVP_VASTAI_MIN_GPU_RAM_MB",),
        flag="--vastai-min-gpu-ram-mb",
        scope=V,
        minimum=0,
    ),
    _k(
        "vastai",
        "min_down_mbps",
        Kind.FLOAT,
        100.0,
        "minimum download bandwidth, Mbit/s",
        env=("MVP_VASTAI_MIN_DOWN_MBPS",),
        flag="--vastai-min-down-mbps",
        scope=V,
        minimum=0,
    ),
    _k(
        "vastai",
        "min_up_mbps",
        Kind.FLOAT,
        None,
        "minimum upload bandwidth, Mbit/s",
        env=("MVP_VASTAI_MIN_UP_MBPS",),
        flag="--vastai-min-up-mbps",
        scope=V,
        minimum=0,
    ),
    _k(
        "vastai",
        "min_reliability",
        Kind.FLOAT,
        0.95,
        "minimum host reliability, 0 to 1",
        env=("MVP_VASTAI_MIN_RELIABILITY",),
        flag="--vastai-min-reliability",
        scope=V,
        minimum=0,
        maximum=1,
    ),
    _k(
        "vastai",
        "require_verified",
        Kind.BOOL,
        True,
        "only verified hosts",
        env=("MVP_VASTAI_REQUIRE_VERIFIED",),
        flag="--vastai-require-verified",
        scope=V,
    ),
    _k(
        "vastai",
        "poll_interval_secs",
        Kind.INT,
        5,
        "seconds between instance status polls",
        env=("MVP_VASTAI_POLL_INTERVAL_SECS",),
        flag="--vastai-poll-interval-secs",
        scope=V,
        minimum=1,
    ),
    # [runpod]
    _k(
        "runpod",
        "api_key",
        Kind.STR,
        None,
        "RunPod API key (secret)",
        env=("MVP_RUNPOD_API_KEY", "RUNPOD_API_KEY"),
        flag="--runpod-api-key",
        secret=True,
        scope=R,
    ),
    _k(
        "runpod",
        "api_key_file",
        Kind.PATH,
        None,
        "file holding the RunPod API key (keeps it out of ps and shell history); used "
        "unless api_key is set in the same or a later layer",
        env=("MVP_RUNPOD_API_KEY_FILE", "RUNPOD_API_KEY_FILE"),
        flag="--runpod-api-key-file",
        scope=R,
    ),
    _k(
        "runpod",
        "api_url",
        Kind.STR,
        "https://api.runpod.io/v2",
        "RunPod REST v2 API base URL (v1 was retired on 2026-11-15)",
        env=("MVP_RUNPOD_API_URL",),
        flag="--runpod-api-url",
        scope=R,
    ),
    _k(
        "runpod",
        "gpu_types",
        Kind.LIST,
        [],
        "GPU type ids (or names) in the order they are tried; empty = auto: the types with "
        "at least min_vram_gb, cheapest first, those out of stock skipped",
        env=("MVP_RUNPOD_GPU_TYPES",),
        flag="--runpod-gpu-types",
        scope=R,
    ),
    _k(
        "runpod",
        "cloud",
        Kind.CHOICE,
        "SECURE",
        "which cloud to rent from",
        env=("MVP_RUNPOD_CLOUD",),
        flag="--runpod-cloud",
        scope=R,
        choices=("SECURE", "COMMUNITY", "ALL"),
    ),
    _k(
        "runpod",
        "container_disk_gb",
        Kind.INT,
        50,
        "container disk in GB",
        env=("MVP_RUNPOD_CONTAINER_DISK_GB",),
        flag="--runpod-container-disk-gb",
        scope=R,
        minimum=1,
    ),
    _k(
        "runpod",
        "min_vram_gb",
        Kind.INT,
        16,
        "VRAM floor per GPU in GB for gpu_types = auto",
        env=("MVP_RUNPOD_MIN_VRAM_GB",),
        flag="--runpod-min-vram-gb",
        scope=R,
        minimum=0,
    ),
    _k(
        "runpod",
        "gpu_count",
        Kind.INT,
        1,
        "GPUs per pod",
        env=("MVP_RUNPOD_GPU_COUNT",),
        flag="--runpod-gpu-count",
        scope=R,
        minimum=1,
    ),
    _k(
        "runpod",
        "min_cuda_version",
        Kind.STR,
        None,
        "lowest CUDA version of the host, as major.minor (e.g. 12.4); unset = 12.8, so the "
        "CUDA image does not land on an older driver",
        env=("MVP_RUNPOD_MIN_CUDA_VERSION",),
        flag="--runpod-min-cuda-version",
        scope=R,
    ),
    _k(
        "runpod",
        "ssh_identity",
        Kind.PATH,
        "~/.ssh/id_ed25519",
        "SSH private key for pods (its public half is registered with the account and sent "
        "to the pod)",
        env=("MVP_RUNPOD_SSH_IDENTITY",),
        flag="--runpod-ssh-identity",
        scope=R,
    ),
    _k(
        "runpod",
        "network_volume",
        Kind.STR,
        None,
        "a network volume (name or id) that holds the model cache, so a second run downloads "
        "nothing; created when missing; it bills per GB and month and only `mvp-tui volume "
        "delete` deletes it (never `down`); unset = none",
        env=("MVP_RUNPOD_NETWORK_VOLUME",),
        flag="--runpod-network-volume",
        scope=R,
    ),
    _k(
        "runpod",
        "network_volume_gb",
        Kind.INT,
        50,
        "size in GB of a network volume mvp-tui creates (10 to 4096)",
        env=("MVP_RUNPOD_NETWORK_VOLUME_GB",),
        scope=R,
        minimum=10,
    ),
    _k(
        "runpod",
        "network_volume_data_center",
        Kind.STR,
        None,
        "data center of a network volume mvp-tui creates (e.g. EU-RO-1); its pods run there",
        env=("MVP_RUNPOD_NETWORK_VOLUME_DATA_CENTER",),
        scope=R,
    ),
    _k(
        "runpod",
        "network_volume_usd_per_gb_month",
        Kind.FLOAT,
        0.07,
        "what a network volume costs per GB and month (RunPod's price under 1 TB; the API "
        "says none), for the spend line and `ls`",
        env=("MVP_RUNPOD_NETWORK_VOLUME_USD_PER_GB_MONTH",),
        scope=R,
        minimum=0,
    ),
    _k(
        "runpod",
        "poll_interval_secs",
        Kind.FLOAT,
        5.0,
        "seconds between pod status polls while a pod comes up (overbrainer polls every 5 s)",
        env=("MVP_RUNPOD_POLL_INTERVAL_SECS",),
        flag="--runpod-poll-interval-secs",
        scope=R,
        above=0,
    ),
    # [limits]
    _k(
        "limits",
        "max_price_per_hour",
        Kind.FLOAT,
        None,
        "hide and refuse offers above this $/h; unset or 0 = no cap",
        env=("MVP_MAX_PRICE_PER_HOUR",),
        flag="--max-price-per-hour",
        minimum=0,
        zero_is_unset=True,
    ),
    _k(
        "limits",
        "max_spend_usd",
        Kind.FLOAT,
        None,
        "tear down when a run's spend reaches this many USD; unset or 0 = no limit",
        env=("MVP_MAX_SPEND_USD",),
        flag="--max-spend-usd",
        minimum=0,
        zero_is_unset=True,
    ),
    _k(
        "limits",
        "max_hours",
        Kind.FLOAT,
        None,
        "tear down a lease after this many hours (the node enforces it too); unset or 0 = no limit",
        env=("MVP_MAX_HOURS",),
        flag="--max-hours",
        minimum=0,
        zero_is_unset=True,
    ),
    _k(
        "limits",
        "idle_teardown_mins",
        Kind.FLOAT,
        None,
        "the node destroys its own lease after this many minutes without a heartbeat from an "
        "attached run (unset = 20 on billing providers; 0 = off)",
        env=("MVP_IDLE_TEARDOWN_MINS",),
        flag="--idle-teardown-mins",
        minimum=0,
    ),
    _k(
        "limits",
        "idle_stop_mins",
        Kind.FLOAT,
        None,
        "the node destroys its own lease after this many minutes with no request to its model "
        "(counted on the node; a kept lease keeps it; unset = 30 on billing providers; 0 = off)",
        env=("MVP_IDLE_STOP_MINS",),
        flag="--idle-stop-mins",
        minimum=0,
    ),
    _k(
        "limits",
        "boot_grace_mins",
        Kind.FLOAT,
        20.0,
        "a rented node destroys its own lease when no agent has attached this many minutes "
        "after its container started (the boot guard, armed by the create request; 0 = off)",
        env=("MVP_BOOT_GRACE_MINS",),
        flag="--boot-grace-mins",
        minimum=0,
    ),
    _k(
        "limits",
        "require_node_watchdog",
        Kind.BOOL,
        True,
        "stop the run and destroy the lease when the node's dead-man's switch cannot prove it "
        "can destroy its own instance",
        env=("MVP_REQUIRE_NODE_WATCHDOG",),
        flag="--require-node-watchdog",
    ),
    # [ui]
    _k(
        "ui",
        "theme",
        Kind.STR,
        "mvp-dark",
        "dashboard theme (mvp-dark, mvp-light, or any Textual theme)",
        env=("MVP_UI_THEME",),
        flag="--theme",
    ),
    _k(
        "ui",
        "offers_refresh_secs",
        Kind.FLOAT,
        60.0,
        "the offer board re-reads prices and stock this often, in place (0 = never)",
        env=("MVP_UI_OFFERS_REFRESH_SECS",),
        flag="--offers-refresh-secs",
        minimum=0,
    ),
    # [offers]
    _k(
        "offers",
        "show_unfit",
        Kind.BOOL,
        True,
        "list offers whose VRAM cannot hold the model (dimmed, last); false = hide them",
        env=("MVP_OFFERS_SHOW_UNFIT",),
        flag="--show-unfit",
    ),
    # [state]
    _k(
        "state",
        "dir",
        Kind.PATH,
        None,
        "where run records live; unset = the user state dir",
        env=("MVP_STATE_DIR",),
        flag="--state-dir",
    ),
)

# [ui.keys] is a table of binding id -> key(s); its ids come from the app's bindings.
UI_KEYS_SECTION = "ui.keys"

BY_DOTTED: dict[str, KeySpec] = {spec.dotted: spec for spec in KEYS}
SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(spec.section for spec in KEYS))

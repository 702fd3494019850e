"""`FakeRunPod`: a stateful RunPod REST v2 API on loopback, for tests.

A real HTTP server (stdlib `ThreadingHTTPServer` on 127.0.0.1:0, in a daemon thread) that
answers with the paths, status codes and bodies of RunPod's v2 OpenAPI document
(/work/shared/reference/runpod-v2-openapi.json) and the recorded live behaviour of
/work/shared/reference/runpod.md: `{api_url}` is `{url}/v2`.

State: a GPU catalog (price, VRAM, max count, stock per cloud and data centers), pods that
move PROVISIONING → RUNNING (without an SSH endpoint for `no_ssh_reads` more looks) → RUNNING
with `ssh.direct` and `runtime.ports`, counted in observations (get or list), never by the
wall clock; account SSH keys; a balance. Every exchange is kept in `exchanges` (request and
answer) so a contract test can validate them against the OpenAPI document.

Account secrets (not in the OpenAPI document; RunPod's docs pages create-a-secret and
delete-a-secret, contract deviation `account-secrets`): `POST /v2/account/secrets` → 201 with
the secret's metadata (never its value), `DELETE /v2/account/secrets/{id}` → 204. A pod's
env may refer to one as `{{ RUNPOD_SECRET_<name> }}`: `container_env` substitutes it as the
pod boots (a reference to no secret stays as written, as an unresolved template would).

Pod logs (`GET /v2/pods/{id}/logs`, getPodLogs): an SSE stream of the lines `add_log_lines`
gave the pod (of the `source` asked for, both when none: LogSource `container`|`system`), the
last `tail` first, then held open `log_hold_s` as the live stream is.

Templates (CreatePodRequest.templateId): `add_template` puts one on the account; a create
naming it takes the template's image, args and ports where the body has none and merges env
per key (the body's win); an unknown id is a 404, a serverless template a 422 (the
document's words). The start command: a template's `args` in RunPod's JSON form
(`{"entrypoint": […], "cmd": […]}`) replaces the image's entrypoint, as RunPod documents for
a template's container start command. Whether the create's own `args` does too is not
documented (the document: "Arguments passed to the container entrypoint"):
`args_reach_entrypoint = True` plays the document's reading: the body's `args` go to the
image's own entrypoint, which for llama.cpp's images (ENTRYPOINT `/app/tools.sh`) prints its
usage into the pod's container log (`TOOLS_SH_USAGE`, from llama.cpp's .devops/tools.sh)
and starts nothing; the pod stays RUNNING and its SSH port never answers.

Faults per operation ("catalog", "create", "get", "list", "logs", "delete", "ssh_keys_get",
"ssh_keys_put", "billing", "secret_create", "secret_delete"): `script(op, Fault(...))`
answers the next call with a fault, optionally after performing it (`perform=True`: a lost
create answer), or drops the connection. Helpers: `no_capacity(gpu, times)` (400 with
RunPod's human `detail`, even when the catalog says HIGH), `forbid_pool(gpu)` (403),
`balance = 0` (402), `rate_limit(op, times, retry_after)` (429 + Retry-After),
`fail_delete(pod, times)`, `running_without_ssh(n)`, `linger_after_delete(n)`.

Cloudflare: a request without a User-Agent, or with a generic one (python-httpx/…, curl/…,
python-requests/…), gets a plain-text 403 `error code: 1010`; `cloudflare_blocks` counts them.

Pod-scoped keys: every pod gets its own `RUNPOD_API_KEY`, valid only on GET and DELETE of
that pod (`instance_env`, `write_instance_env`, `node_env_file` give it to the "node"); any
other use answers 403 and lands in `scope_violations`. `refuse_self_delete` plays the recorded
real failure: every change by a pod key (its own DELETE too) answers 403 `access denied`,
kept in `refused_self`. `destroyed_by` says whose key
deleted a pod ("account" or "instance").
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from mvp_tui.rehearsal.http_fake import ApiHandler, Reply

JSON = "application/json"
PROBLEM = "application/problem+json"
CAPACITY_DETAIL = (
    "There are no longer any instances available with the requested specifications. "
    "Please refresh and try again."
)
BALANCE_DETAIL = "Your account balance is too low to rent a pod. Please add funds to your account."
POOL_DETAIL = "access denied: your account cannot access the requested pool"
_GENERIC_UA = re.compile(
    r"^(python-httpx|python-requests|python-urllib|curl|wget|go-http-client|okhttp|java|"
    r"axios|node-fetch|undici|libwww-perl|mozilla/5\.0$)",
    re.IGNORECASE,
)
# Top-level fields of CreatePodRequest (unevaluatedProperties: false → anything else is 422,
# `cmd` and v1's `dockerStartCmd` included: the document's start field is `args`).
_CREATE_FIELDS = {
    "args", "disk", "env", "image", "ports", "registry", "name", "cloud", "cpu",
    "dataCenterIds", "globalNetworking", "gpu", "mounts", "startJupyter", "startSsh",
    "templateId",
}
_GPU_FIELDS = {"id", "count", "allowedCudaVersions", "minCudaVersion"}
# llama.cpp's images: ENTRYPOINT ["/app/tools.sh"] (.devops/cuda.Dockerfile, full target).
LLAMA_CPP_IMAGE = re.compile(r"(^|/)ggml-org/llama\.cpp:|(^|/)ggerganov/llama\.cpp:")
# What /app/tools.sh (llama.cpp .devops/tools.sh, the version that execs ./llama-server)
# prints for an argument it does not know; `{arg1}` is its first argument.
TOOLS_SH_USAGE = (
    "Unknown command: {arg1}",
    "Available commands: ",
    "  --run (-r): Run a model previously converted into ggml",
    '              ex: -m /models/7B/ggml-model-q4_0.bin -p "Building a website can be done '
    'in 10 simple steps:" -n 512',
    "  --convert (-c): Convert a llama model into ggml",
    '              ex: --outtype f16 "/models/7B/" ',
    "  --quantize (-q): Optimize with quantization process ggml",
    '              ex: "/models/7B/ggml-model-f16.bin" "/models/7B/ggml-model-q4_0.bin" 2',
    "  --all-in-one (-a): Execute --convert & --quantize",
    '              ex: "/models/" 7B',
    "  --server (-s): Run a model on the server",
    "              ex: -m /models/7B/ggml-model-q4_0.bin -c 2048 -ngl 43 -mg 1 --port 8080",
)
LOG_SOURCES = ("container", "system")
# Account secrets, per docs.runpod.io/api-reference-v2/account/create-a-secret.
SECRET_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.\-/]*$")
SECRET_REFERENCE = re.compile(r"\{\{\s*RUNPOD_SECRET_([a-zA-Z0-9_.\-/]+)\s*\}\}")
_SECRET_FIELDS = {"name", "value", "description"}
_SECRET_VALUE_MAX = 16 * 1024 * 1024
_TITLES = {
    400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
    404: "Not Found", 409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests",
    500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass
class Fault:
    """One scripted answer for one call of an operation."""

    status: int = 500
    body: Any = None  # JSON value, or str for a raw text body; None → RunPod's problem body
    delay_s: float = 0.0
    perform: bool = False  # do the real operation first, then answer with this fault
    drop: bool = False  # close the connection with no answer (after performing if perform)
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    gpu: str | None = None  # create only: applies to creates of this GPU type only


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON, the raw text when not JSON, or None when empty


_Reply = Reply


@dataclass(frozen=True)
class _LogStream:
    """The body of a log stream: its backfill events, written before the stream is held."""

    text: str


@dataclass(frozen=True)
class Exchange:
    """One request and the answer the fake gave (None: the connection was dropped)."""

    op: str | None
    request: RecordedRequest
    status: int | None
    body: Any
    content_type: str
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)  # when the answer went out


@dataclass
class _Pod:
    row: dict[str, Any]
    gpu_id: str
    looks: int = 0
    no_ssh_reads: int = 0
    deleted: bool = False
    lingering: int = 0
    key: str = field(default_factory=lambda: "rpa_pod_" + secrets.token_hex(20))
    destroyed_by: str | None = None
    ssh: tuple[str, int] | None = None
    cmd: tuple[str, ...] = ()  # the start command its `args` gave (never shown)
    no_sshd: bool = False  # its container runs the image's own entrypoint: no SSH ever
    exited: bool = False  # stopped: EXITED, still billing its disk (PodStatus)


def problem(status: int, detail: str, **extra: Any) -> _Reply:
    body = {"title": _TITLES.get(status, "Error"), "status": status, "detail": detail, **extra}
    return _Reply(status, body, PROBLEM)


def _start_command(args: str) -> tuple[str, ...]:
    """`args` as RunPod reads its JSON form: the entrypoint, then the command."""
    try:
        start = json.loads(args)
    except ValueError:
        return ()
    if not isinstance(start, dict):
        return ()
    argv = [*start.get("entrypoint", []), *start.get("cmd", [])]
    return tuple(argv) if all(isinstance(a, str) for a in argv) else ()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


class FakeRunPod:
    """The fake RunPod API. Use as a context manager; `api_url` is the v2 base URL."""

    def __init__(
        self,
        *,
        api_key: str = "rpa_fake_account_key_0123456789abcdef",
        provisioning_polls: int = 1,
        no_ssh_reads: int = 0,
    ) -> None:
        self.api_key = api_key
        self.provisioning_polls = provisioning_polls
        self.no_ssh_reads = no_ssh_reads
        self.url = ""
        self.balance = 25.0
        self.account_keys: list[str] = []
        self.requests: list[RecordedRequest] = []
        self.exchanges: list[Exchange] = []
        self.cloudflare_blocks = 0
        self.scope_violations: list[RecordedRequest] = []
        # The SSH endpoint running pods report (host, port); None → 127.0.0.1:(10000 + n).
        self.ssh_endpoint: tuple[str, int] | None = None
        # Where each new pod's container environment is written (NUL-separated, as
        # /proc/1/environ): RUNPOD_POD_ID and its pod-scoped RUNPOD_API_KEY.
        self.node_env_file: Path | None = None
        self.clock: Callable[[], float] = time.time
        # Called with each create body the fake is about to place (tests look at the world
        # as it is when the create arrives, e.g. the run record on disk).
        self.on_create: Callable[[dict[str, Any]], None] | None = None
        # Set whenever a pod is deleted (tests wait on it instead of polling).
        self.deleted_event = threading.Event()
        # The recorded real failure: a pod key reads its pod but gets 403 on its own delete
        # (and on any other change). Each refused request is kept; `refused_cond` wakes waiters.
        self.refuse_self_delete = False
        self.refused_self: list[RecordedRequest] = []
        self.refused_cond = threading.Condition()
        # None: the whole list in one answer (the document); N: pages of N (recorded live).
        self.page_size: int | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._gpus: dict[str, dict[str, Any]] = {}
        self._stock: dict[tuple[str, str], str] = {}
        self._pods: dict[str, _Pod] = {}
        self._next_pod = 1
        self._volumes: dict[str, dict[str, Any]] = {}  # NetworkVolume rows, by id
        self._next_volume = 1
        self._faults: dict[str, deque[Fault]] = {}
        self._rate_limited: dict[str, list[int]] = {}  # op → [times, retry_after]
        self._no_capacity: dict[str, int] = {}
        self._forbidden: set[str] = set()
        self._delete_failures: list[list[Any]] = []  # [pod_id | None, times, status]
        self._linger = 0
        self._actor = "account"
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._secrets: dict[str, dict[str, Any]] = {}  # id → name, value, description, …
        self._next_secret = 1
        # Every secret id ever deleted, in order (tests assert on what went, and when).
        self.deleted_secrets: list[str] = []
        self._pod_logs: dict[str, list[tuple[str, str]]] = {}  # pod id → (source, line)
        self._templates: dict[str, dict[str, Any]] = {}  # Template rows, by id
        # True: the create's own `args` reach the image's entrypoint as arguments (the
        # document's words); False: read as RunPod's JSON start command, as a template's is.
        self.args_reach_entrypoint = False
        # How long a log stream stays open after its backfill (the real one stays open).
        self.log_hold_s = 10.0

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> FakeRunPod:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def api_url(self) -> str:
        return f"{self.url}/v2"

    def start(self) -> None:
        fake = self

        class Handler(ApiHandler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-runpod",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- control API ------------------------------------------------------------------------

    def add_gpu(
        self,
        gpu_id: str,
        *,
        name: str | None = None,
        memory: int = 24,
        secure_price: float = 0.44,
        community_price: float = 0.31,
        max_secure: int = 8,
        max_community: int = 4,
        stock: str = "HIGH",
        community_stock: str | None = None,
        data_centers: tuple[str, ...] = ("US-TX-3", "EU-RO-1"),
        cuda: tuple[str, ...] = ("12.8", "12.6"),
    ) -> str:
        """A GPU type in the catalog; `stock` is its SECURE availability level."""
        with self._lock:
            self._gpus[gpu_id] = {
                "id": gpu_id,
                "name": name or gpu_id.replace("NVIDIA ", "").replace("GeForce ", ""),
                "pool": None,
                "manufacturer": "NVIDIA" if gpu_id.startswith("NVIDIA") else "UNKNOWN",
                "memory": memory,
                "secure": max_secure > 0,
                "community": max_community > 0,
                "price": {"secure": secure_price, "community": community_price},
                "maxCount": {"secure": max_secure, "community": max_community},
                "_dcs": list(data_centers),
                "_cuda": list(cuda),
            }
            self._stock[(gpu_id, "SECURE")] = stock
            self._stock[(gpu_id, "COMMUNITY")] = community_stock or stock
            return gpu_id

    def set_stock(self, gpu_id: str, level: str, cloud: str = "SECURE") -> None:
        with self._lock:
            self._stock[(gpu_id, cloud)] = level

    def no_capacity(self, gpu_id: str, times: int = 1) -> None:
        """The next `times` creates of `gpu_id` answer 400 "no longer any instances"."""
        with self._lock:
            self._no_capacity[gpu_id] = self._no_capacity.get(gpu_id, 0) + times

    def forbid_pool(self, gpu_id: str) -> None:
        """Creates of `gpu_id` answer 403: the account cannot access its pool."""
        with self._lock:
            self._forbidden.add(gpu_id)

    def script(self, op: str, *faults: Fault) -> None:
        with self._lock:
            self._faults.setdefault(op, deque()).extend(faults)

    def lose_create_answer(
        self, status: int = 500, *, drop: bool = False, gpu: str | None = None
    ) -> None:
        """The next create (of `gpu`, when given) makes its pod, then answers `status` (or
        drops the connection)."""
        self.script("create", Fault(status=status, perform=True, drop=drop, gpu=gpu))

    def rate_limit(self, op: str, times: int, retry_after: int = 1) -> None:
        """The next `times` calls of `op` answer 429 with `Retry-After: retry_after`."""
        with self._lock:
            entry = self._rate_limited.setdefault(op, [0, retry_after])
            entry[0] += times
            entry[1] = retry_after

    def fail_delete(self, pod_id: str | None, times: int, status: int = 500) -> None:
        """The next `times` deletes of `pod_id` (None = any) fail without deleting."""
        with self._lock:
            self._delete_failures.append([pod_id, times, status])

    def running_without_ssh(self, reads: int) -> None:
        """Pods created from now on report RUNNING with null ssh/runtime for `reads` looks."""
        with self._lock:
            self.no_ssh_reads = reads

    def show_ssh(self) -> None:
        """Every pod (and those created from now on) shows its SSH endpoint once RUNNING."""
        with self._lock:
            self.no_ssh_reads = 0
            for pod in self._pods.values():
                pod.no_ssh_reads = 0

    def linger_after_delete(self, looks: int) -> None:
        """Pods deleted from now on still show (as before) in the next `looks` gets/lists."""
        with self._lock:
            self._linger = looks

    def add_pod(self, name: str, gpu_id: str | None = None, **fields: Any) -> str:
        """A pod already on the account (not from a create), running; returns its id."""
        with self._lock:
            gpu = gpu_id or next(iter(self._gpus), "NVIDIA GeForce RTX 4090")
            body = {"name": name, "image": "ubuntu:22.04", "gpu": {"id": gpu}, "ports": ["22/tcp"]}
            pod = self._new_pod(body)
            pod.looks = self.provisioning_polls + pod.no_ssh_reads + 1
            pod.row.update(fields)
            return str(pod.row["id"])

    def exit_pod(self, pod_id: str) -> None:
        """The pod's container exits (stopped, not terminated): EXITED from now on."""
        with self._lock:
            self._pods[pod_id].exited = True

    def add_template(
        self,
        template_id: str,
        *,
        image: str = "ghcr.io/ggml-org/llama.cpp:full-cuda",
        args: str = "",
        ports: tuple[str, ...] = ("22/tcp",),
        env: dict[str, str] | None = None,
        serverless: bool = False,
    ) -> str:
        """A pod template on the account (the document's Template)."""
        with self._lock:
            self._templates[template_id] = {
                "id": template_id, "name": f"template {template_id}", "image": image,
                "args": args, "disk": 50, "ports": list(ports), "env": dict(env or {}),
                "serverless": serverless, "startSsh": False, "startJupyter": False,
                # The rest of the document's required Template fields.
                "mounts": {}, "registry": None, "public": False, "category": "NVIDIA",
                "allowedCudaVersions": [],
            }
            return template_id

    def add_log_lines(self, pod_id: str, *lines: str, source: str = "container") -> None:
        """Lines in the pod's log (`GET /v2/pods/{id}/logs` streams them)."""
        with self._lock:
            self._pod_logs.setdefault(pod_id, []).extend((source, line) for line in lines)

    def log_reads(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/logs")]

    def cmd_of(self, pod_id: str) -> list[str]:
        """The start command a pod's `args` gave in RunPod's JSON form (`{"entrypoint": […],
        "cmd": […]}`): what its container runs first; empty for plain arguments, which go
        to the image's own entrypoint."""
        with self._lock:
            return list(self._pods[pod_id].cmd)

    def env_of(self, pod_id: str) -> dict[str, str]:
        """The env a pod was created with."""
        with self._lock:
            return dict(self._pods[pod_id].row["env"])

    def container_env(self, pod_id: str) -> dict[str, str]:
        """What the pod's container starts with: the create's env with its secret references
        filled in from the secrets on the account now (the pod boots), then what RunPod adds
        (the pod's id and its pod-scoped key)."""
        with self._lock:
            values = {s["name"]: s["value"] for s in self._secrets.values()}

        def fill(match: re.Match[str]) -> str:
            return str(values.get(match[1], match[0]))

        env = {k: SECRET_REFERENCE.sub(fill, v) for k, v in self.env_of(pod_id).items()}
        return {**env, **self.instance_env(pod_id)}

    def secrets(self) -> list[dict[str, Any]]:
        """The account's secrets as RunPod shows them (never their values)."""
        with self._lock:
            return [self._secret_view(i, s) for i, s in self._secrets.items()]

    def secret_values(self) -> list[str]:
        """What the secrets hold (what a test must never find anywhere else)."""
        with self._lock:
            return [s["value"] for s in self._secrets.values()]

    def secret_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith("/v2/account/secrets")]

    def pods(self) -> list[dict[str, Any]]:
        """Live (not deleted) pods as the API would show them now (not counted as a look)."""
        with self._lock:
            return [self._view(p) for p in self._pods.values() if not p.deleted]

    def billing(self) -> list[dict[str, Any]]:
        """Pods that bill now: every pod not deleted (a stopped pod bills its disk)."""
        return self.pods()

    def deleted(self) -> list[str]:
        with self._lock:
            return [pid for pid, p in self._pods.items() if p.deleted]

    def wait_refused(self, count: int, timeout: float) -> bool:
        """Until `count` pod-key changes were refused (`refuse_self_delete`), or the timeout."""
        with self.refused_cond:
            return self.refused_cond.wait_for(lambda: len(self.refused_self) >= count, timeout)

    def destroyed_by(self, pod_id: str) -> str | None:
        with self._lock:
            return self._pods[pod_id].destroyed_by

    def instance_env(self, pod_id: str) -> dict[str, str]:
        """What RunPod puts into the pod's container for it to act on itself."""
        with self._lock:
            key = self._pods[pod_id].key
        return {"RUNPOD_POD_ID": pod_id, "RUNPOD_API_KEY": key}

    def write_instance_env(self, pod_id: str, path: str | Path) -> Path:
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            **self.instance_env(pod_id),
            "RUNPOD_POD_HOSTNAME": f"{pod_id}-64411eb2",
            "RUNPOD_GPU_COUNT": "1",
        }
        target = Path(path)
        target.write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
        return target

    def create_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path == "/v2/pods"]

    def answers(self, status: int) -> list[Exchange]:
        with self._lock:
            return [x for x in self.exchanges if x.status == status]

    # -- state machine ----------------------------------------------------------------------

    def _new_pod(self, body: dict[str, Any]) -> _Pod:
        pod_id = f"fk{self._next_pod:04d}{secrets.token_hex(4)}"
        self._next_pod += 1
        gpu = body.get("gpu") or {}
        gpu_id = str(gpu.get("id"))
        count = int(gpu.get("count") or 1)
        cloud = str(body.get("cloud") or "SECURE")
        entry = self._gpus.get(gpu_id)
        price = entry["price"]["secure" if cloud == "SECURE" else "community"] if entry else 0.5
        now = self.clock()
        dcs = body.get("dataCenterIds") or (entry["_dcs"] if entry else ["US-TX-3"])
        row: dict[str, Any] = {
            "id": pod_id,
            "name": body.get("name"),
            "status": "PROVISIONING",
            "actions": ["terminate"],
            "image": body.get("image") or "",
            "args": body.get("args") or "",
            "disk": int(body.get("disk") or 50),
            "mounts": copy.deepcopy(body.get("mounts") or {}),
            "ports": list(body.get("ports") or []),
            "env": dict(body.get("env") or {}),
            "registry": None,
            "gpu": {"id": gpu_id, "count": count},
            "cloud": cloud,
            "dataCenterId": dcs[0] if dcs else None,
            "cudaVersion": "12.8",
            "ssh": {"proxy": None, "direct": None},
            "template": None,
            "cost": round(price * count, 4),
            "locked": False,
            "globalNetworking": {"enabled": False},
            "runtime": None,
            "createdAt": _iso(now),
            "startedAt": None,
        }
        args = str(body.get("args") or "")
        # A template's start command replaces the entrypoint (documented); the create's own
        # `args` do so only unless `args_reach_entrypoint`.
        from_template = bool(body.get("_args_from_template"))
        honoured = from_template or not self.args_reach_entrypoint
        pod = _Pod(row=row, gpu_id=gpu_id, no_ssh_reads=self.no_ssh_reads,
                   cmd=_start_command(args) if honoured else ())
        n = len(self._pods)
        pod.ssh = self.ssh_endpoint or ("127.0.0.1", 10000 + n)
        self._pods[pod_id] = pod
        if args and not pod.cmd and LLAMA_CPP_IMAGE.search(row["image"]):
            # /app/tools.sh got the args as its first argument: its usage, and nothing runs.
            pod.no_sshd = True
            pod.ssh = ("127.0.0.1", _closed_port())
            usage = [line.format(arg1=args) for line in TOOLS_SH_USAGE]
            self._pod_logs.setdefault(pod_id, []).extend(("container", u) for u in usage)
        return pod

    def _view(self, pod: _Pod) -> dict[str, Any]:
        row = copy.deepcopy(pod.row)
        if pod.exited:
            # PodStatus EXITED: "container exited (stopped)"; `runtime` is null when not
            # RUNNING, `cost` 0.0 when EXITED (the disk still bills), `actions` the
            # transitions valid from here (PodAction).
            row.update(status="EXITED", actions=["start", "terminate"], runtime=None, cost=0.0,
                       ssh={"proxy": None, "direct": None})
            return row
        if pod.looks < self.provisioning_polls:
            return row
        row["status"] = "RUNNING"
        row["actions"] = ["stop", "restart", "terminate"]
        row["startedAt"] = row["createdAt"]
        row["ssh"]["proxy"] = {
            "host": "ssh.runpod.io",
            "port": 22,
            "username": f"{row['id']}-64411eb2",
            "command": f"ssh {row['id']}-64411eb2@ssh.runpod.io",
        }
        if pod.looks < self.provisioning_polls + pod.no_ssh_reads:
            return row  # RUNNING is not readiness: no direct endpoint, no runtime yet
        if "22/tcp" in row["ports"] and pod.ssh is not None:
            # A pod that runs no sshd still shows its mapped port (recorded: portMappings
            # present while TCP to it stays closed); nothing listens there.
            host, port = pod.ssh
            row["ssh"]["direct"] = {
                "host": host,
                "port": port,
                "username": "root",
                "command": f"ssh root@{host} -p {port}",
            }
            ports = [{"private": 22, "public": port, "type": "tcp", "ip": host}]
        else:
            ports = []
        row["runtime"] = {"uptime": pod.looks, "gpus": [], "ports": ports}
        return row

    def _look(self, pod: _Pod) -> dict[str, Any]:
        view = self._view(pod)
        if not pod.deleted:
            pod.looks += 1
        else:
            pod.lingering -= 1
        return view

    # -- dispatch ---------------------------------------------------------------------------

    def _handle(self, handler: ApiHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        path = parts.path
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        raw = handler.read_body()
        body: Any = None
        body_ok = True
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body, body_ok = raw.decode("utf-8", "replace"), False
        headers = {k.lower(): v for k, v in handler.headers.items()}
        request = RecordedRequest(method, path, query, headers, body)
        with self._lock:
            self.requests.append(request)
        op, perform = self._route(method, path, query, body, body_ok)
        reply = self._answer(request, op, perform, handler)
        if reply is not None and isinstance(reply.body, _LogStream):
            with self._lock:
                self.exchanges.append(
                    Exchange(op, request, 200, reply.body.text, reply.content_type,
                             dict(reply.headers))
                )
            self._stream_logs(handler, reply)
            return
        with self._lock:
            if reply is None:
                self.exchanges.append(Exchange(op, request, None, None, "", {}))
            else:
                self.exchanges.append(
                    Exchange(
                        op, request, reply.status, reply.body, reply.content_type,
                        dict(reply.headers),
                    )
                )
        if reply is None:
            handler.drop()
        else:
            handler.reply(reply)

    def _answer(
        self, request: RecordedRequest, op: str | None, perform: Any, handler: ApiHandler
    ) -> _Reply | None:
        ua = request.headers.get("user-agent", "").strip()
        if not ua or _GENERIC_UA.match(ua):
            with self._lock:
                self.cloudflare_blocks += 1
            return _Reply(403, "error code: 1010", "text/plain; charset=UTF-8")
        owner = self._pod_key_owner(request.headers)
        if owner is not None and self.refuse_self_delete and request.method != "GET":
            with self.refused_cond:
                self.refused_self.append(request)
                self.refused_cond.notify_all()
            return problem(403, "access denied")
        if owner is not None:
            own = op in ("get", "delete") and unquote(request.path.rsplit("/", 1)[-1]) == owner
            if not own:
                with self._lock:
                    self.scope_violations.append(request)
                return problem(403, "access denied")
        elif not self._authorised(request.headers):
            detail = (
                "missing bearer token"
                if "authorization" not in request.headers
                else ("invalid api key")
            )
            return problem(401, detail)
        if op is None:
            return problem(404, f"{request.method} {request.path} is not an API path")
        if owner is not None:
            perform = self._acting_as("instance", perform)
        with self._lock:
            limited = self._rate_limited.get(op)
            if limited and limited[0] > 0:
                limited[0] -= 1
                return self._rate_limit_reply(limited[1])
            fault = self._next_fault(op, request)
        if fault is None:
            return self._perform(perform)
        if fault.perform:
            self._perform(perform)
        if fault.delay_s and self._stopping.wait(fault.delay_s):
            return None
        if fault.drop:
            return None
        if fault.body is None:
            reply = problem(fault.status, self._default_detail(fault.status))
        else:
            content_type = fault.content_type or (
                "text/plain; charset=UTF-8" if isinstance(fault.body, str) else PROBLEM
            )
            reply = _Reply(fault.status, fault.body, content_type)
        reply.headers.update(fault.headers)
        return reply

    @staticmethod
    def _default_detail(status: int) -> str:
        if status == 402:
            return BALANCE_DETAIL
        if status >= 500:
            return "Something went wrong. Please try again later or contact support."
        return _TITLES.get(status, "error").lower()

    def _rate_limit_reply(self, retry_after: int) -> _Reply:
        reply = problem(429, "rate limit exceeded for the minute window")
        reply.headers["Retry-After"] = str(retry_after)
        return reply

    def _perform(self, operation: Any) -> _Reply:
        with self._lock:
            try:
                reply: _Reply = operation()
            except Exception as exc:  # the fake must answer whatever happens
                reply = problem(500, f"fake RunPod bug: {exc!r}")
        return reply

    def _next_fault(self, op: str, request: RecordedRequest) -> Fault | None:
        queue = self._faults.get(op) or deque()
        body = request.body if isinstance(request.body, dict) else {}
        gpu = body.get("gpu") if isinstance(body.get("gpu"), dict) else {}
        for fault in queue:
            if fault.gpu is None or fault.gpu == gpu.get("id"):
                queue.remove(fault)
                return fault
        if op == "delete":
            pod_id = unquote(request.path.rsplit("/", 1)[-1])
            for entry in self._delete_failures:
                target, times, status = entry
                if times > 0 and target in (None, pod_id):
                    entry[1] = times - 1
                    return Fault(status=status)
        return None

    def _pod_key_owner(self, headers: dict[str, str]) -> str | None:
        auth = headers.get("authorization") or ""
        key = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        if not key:
            return None
        with self._lock:
            for pod_id, pod in self._pods.items():
                if pod.key == key:
                    return pod_id
        return None

    def _authorised(self, headers: dict[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.api_key}"

    def _acting_as(self, actor: str, operation: Any) -> Any:
        def run() -> _Reply:
            self._actor = actor
            try:
                reply: _Reply = operation()
                return reply
            finally:
                self._actor = "account"

        return run

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any, body_ok: bool
    ) -> tuple[str | None, Any]:
        segments = [unquote(s) for s in path.strip("/").split("/")]
        if not segments or segments[0] != "v2":
            return None, None
        rest = segments[1:]
        bad_json = problem(400, "request body is not valid JSON")

        def guarded(fn: Any, *args: Any) -> Any:
            return (lambda: bad_json) if not body_ok else (lambda: fn(*args))

        match method, rest:
            case ("GET", ["catalog", "gpus"]):
                return "catalog", lambda: self._catalog(query)
            case ("POST", ["pods"]):
                return "create", guarded(self._create, body)
            case ("GET", ["pods"]):
                return "list", lambda: self._list(query)
            case ("GET", ["pods", pod_id]):
                return "get", lambda: self._get(pod_id)
            case ("GET", ["pods", pod_id, "logs"]):
                return "logs", lambda: self._logs(pod_id, query)
            case ("DELETE", ["pods", pod_id]):
                return "delete", lambda: self._delete(pod_id)
            case ("GET", ["account", "ssh-keys"]):
                return "ssh_keys_get", self._ssh_keys
            case ("PUT", ["account", "ssh-keys"]):
                return "ssh_keys_put", guarded(self._ssh_keys_put, body)
            case ("GET", ["billing", "pods"]):
                return "billing", lambda: self._billing(query)
            case ("POST", ["account", "secrets"]):
                return "secret_create", guarded(self._secret_create, body)
            case ("DELETE", ["account", "secrets", secret_id]):
                return "secret_delete", lambda: self._secret_delete(secret_id)
            case ("GET", ["network-volumes"]):
                return "volumes_list", self._volumes_list
            case ("POST", ["network-volumes"]):
                return "volume_create", guarded(self._volume_create, body)
            case ("GET", ["network-volumes", volume_id]):
                return "volume_get", lambda: self._volume_get(volume_id)
            case ("PATCH", ["network-volumes", volume_id]):
                return "volume_patch", guarded(self._volume_patch, volume_id, body)
            case ("DELETE", ["network-volumes", volume_id]):
                return "volume_delete", lambda: self._volume_delete(volume_id)
        return None, None

    # -- network volumes (the document's /network-volumes, CreateNetworkVolumeRequest) -------

    def volumes(self) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(v) for v in self._volumes.values()]

    def _volumes_list(self) -> _Reply:
        return _Reply(200, {"networkVolumes": [copy.deepcopy(v) for v in self._volumes.values()]})

    @staticmethod
    def _volume_errors(body: Any, fields: tuple[str, ...], required: tuple[str, ...]) -> list[str]:
        if not isinstance(body, dict):
            return ["$: expected an object"]
        errors = [f"$: additional properties '{k}' not allowed" for k in body if k not in fields]
        errors += [f"$.{k}: required" for k in required if k not in body]
        for key in ("name", "dataCenter"):
            if key in body and (not isinstance(body[key], str) or not body[key]):
                errors.append(f"$.{key}: expected a non-empty string")
        size = body.get("size", 10)
        if isinstance(size, bool) or not isinstance(size, int) or not 10 <= size <= 4096:
            errors.append("$.size: expected an integer from 10 to 4096")
        if body.get("type", "STANDARD") not in ("STANDARD", "HIGH_PERFORMANCE"):
            errors.append("$.type: expected STANDARD or HIGH_PERFORMANCE")
        return errors

    def _volume_create(self, body: Any) -> _Reply:
        fields = ("name", "size", "dataCenter", "type")
        errors = self._volume_errors(body, fields, ("name", "size", "dataCenter"))
        if errors:
            return problem(422, "Request validation failed.", errors=errors)
        volume_id = f"vol{self._next_volume:07d}"
        self._next_volume += 1
        row = {"id": volume_id, "name": body["name"], "size": body["size"],
               "dataCenter": body["dataCenter"], "type": body.get("type", "STANDARD")}
        self._volumes[volume_id] = row
        return _Reply(201, copy.deepcopy(row))

    def _volume_get(self, volume_id: str) -> _Reply:
        row = self._volumes.get(volume_id)
        return problem(404, "network volume not found") if row is None else _Reply(200, row)

    def _volume_patch(self, volume_id: str, body: Any) -> _Reply:
        row = self._volumes.get(volume_id)
        if row is None:
            return problem(404, "network volume not found")
        errors = self._volume_errors(body, ("name", "size"), ())
        if not errors and not body:
            errors = ["$: expected at least 1 property"]
        if errors:
            return problem(422, "Request validation failed.", errors=errors)
        if body.get("size", row["size"]) < row["size"]:
            return problem(400, "network volume storage cannot be reduced")
        row.update(body)
        return _Reply(200, copy.deepcopy(row))

    def _volume_delete(self, volume_id: str) -> _Reply:
        if self._volumes.pop(volume_id, None) is None:
            return problem(404, "network volume not found")
        return _Reply(204, None)

    def _mount_problem(self, body: dict[str, Any]) -> str | None:
        """A network mount must name an existing volume in a data center the pod may use."""
        mounts = body.get("mounts") or {}
        network = mounts.get("network") if isinstance(mounts, dict) else None
        if not network:
            return None
        if mounts.get("persistent") is not None:
            return "at most one of mounts.persistent and mounts.network"
        row = self._volumes.get(str(network[0].get("volumeId")))
        if row is None:
            return "network volume not found"
        if row["dataCenter"] not in (body.get("dataCenterIds") or [row["dataCenter"]]):
            return "the network volume is in another data center than the pod may use"
        return None

    # -- operations (run under the lock) ----------------------------------------------------

    def _catalog(self, query: dict[str, str]) -> _Reply:
        include = query.get("include")
        product = query.get("product")
        if include and not product:
            return problem(400, "product is required with include=AVAILABILITY")
        if product and not include:
            return problem(400, "product is valid only with include=AVAILABILITY")
        cloud = query.get("cloud") or "SECURE"
        if cloud not in ("SECURE", "COMMUNITY"):
            return problem(422, "Request validation failed.", errors=["$.cloud: invalid"])
        count = int(query.get("count") or 1)
        gpus = []
        for entry in self._gpus.values():
            row = {k: copy.deepcopy(v) for k, v in entry.items() if not k.startswith("_")}
            if include:
                level = self._stock[(entry["id"], cloud)]
                max_count = entry["maxCount"]["secure" if cloud == "SECURE" else "community"]
                if count > max_count:
                    level = "NONE"
                row["availability"] = level
                if level != "NONE":
                    row["dataCenters"] = [
                        {"id": dc, "name": dc.replace("-", " "), "availability": level}
                        for dc in entry["_dcs"]
                    ]
                row["cudaVersions"] = [
                    {"version": v, "available": level != "NONE"} for v in entry["_cuda"]
                ]
            gpus.append(row)
        return _Reply(200, {"gpus": gpus})

    def _create(self, body: Any) -> _Reply:
        if not isinstance(body, dict):
            return problem(422, "Request validation failed.", errors=["$: expected an object"])
        errors = [f"$: additional properties '{k}' not allowed" for k in body if k not in
                  _CREATE_FIELDS]
        gpu = body.get("gpu")
        if isinstance(gpu, dict):
            errors += [f"$.gpu: additional properties '{k}' not allowed" for k in gpu
                       if k not in _GPU_FIELDS]
        if not isinstance(body.get("name"), str) or not body["name"]:
            errors.append("$.name: required")
        if not isinstance(body.get("args", ""), str):
            errors.append("$.args: expected a string")
        template_id = body.get("templateId")
        if "templateId" in body and (not isinstance(template_id, str) or not template_id):
            errors.append("$.templateId: expected a string of at least 1 character")
        if "templateId" not in body and not isinstance(body.get("image"), str):
            errors.append("$.image: required")
        if errors:
            return problem(422, "Request validation failed.", errors=errors)
        if isinstance(template_id, str):
            template = self._templates.get(template_id)
            if template is None:
                return problem(404, f"template {template_id} not found")
            if template["serverless"]:
                return problem(422, "a serverless template cannot create a pod")
            body = self._from_template(body, template)
        if not isinstance(gpu, dict) or not isinstance(gpu.get("id"), str):
            return problem(400, "exactly one of gpu or cpu must be set")
        gpu_id = gpu["id"]
        entry = self._gpus.get(gpu_id)
        if entry is None:
            return problem(400, f"unknown GPU type {gpu_id!r}")
        if gpu_id in self._forbidden:
            return problem(403, POOL_DETAIL)
        if self.balance <= 0:
            return problem(402, BALANCE_DETAIL)
        cloud = str(body.get("cloud") or "SECURE")
        left = self._no_capacity.get(gpu_id, 0)
        if left > 0:
            self._no_capacity[gpu_id] = left - 1
            return problem(400, CAPACITY_DETAIL)
        if self._stock.get((gpu_id, cloud)) == "NONE":
            return problem(400, CAPACITY_DETAIL)
        mount_problem = self._mount_problem(body)
        if mount_problem is not None:
            return problem(400, mount_problem)
        if self.on_create is not None:
            self.on_create(body)
        pod = self._new_pod(body)
        if self.node_env_file is not None:
            self.write_instance_env(str(pod.row["id"]), self.node_env_file)
        return _Reply(201, self._view(pod))

    @staticmethod
    def _from_template(body: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
        """The create as the template resolves it: body fields override the template's,
        except `env`, merged per key with the body's values winning."""
        merged = dict(body)
        for name in ("image", "args", "ports", "disk"):
            if name not in merged and template.get(name) not in (None, ""):
                merged[name] = copy.deepcopy(template[name])
                if name == "args":
                    merged["_args_from_template"] = True
        merged["env"] = {**template.get("env", {}), **(body.get("env") or {})}
        return merged

    def _get(self, pod_id: str) -> _Reply:
        pod = self._pods.get(pod_id)
        if pod is None or (pod.deleted and pod.lingering <= 0):
            return problem(404, "pod not found")
        return _Reply(200, self._look(pod))

    def _list(self, query: dict[str, str]) -> _Reply:
        live = [p for p in self._pods.values() if not p.deleted or p.lingering > 0]
        if self.page_size is None:
            return _Reply(200, {"pods": [self._look(p) for p in live]})
        # Pages as recorded live (overbrainer, SkyPilot): `cursor` in, `pagination` out.
        start = int(query.get("cursor") or 0)
        page = live[start : start + self.page_size]
        more = start + self.page_size < len(live)
        pagination = {
            "hasNextPage": more,
            "nextCursor": str(start + self.page_size) if more else None,
        }
        return _Reply(200, {"pods": [self._look(p) for p in page], "pagination": pagination})

    def _logs(self, pod_id: str, query: dict[str, str]) -> _Reply:
        """getPodLogs: an SSE stream, the last `tail` lines (default 100, at most 5000) first;
        it then stays open for live lines (`log_hold_s` here)."""
        pod = self._pods.get(pod_id)
        if pod is None or pod.deleted:
            return problem(404, "pod not found")
        raw = query.get("tail", "100")
        if not raw.isdigit() or int(raw) > 5000:
            return problem(400, "tail must be an integer from 0 to 5000")
        source = query.get("source")
        if source is not None and source not in LOG_SOURCES:
            return problem(422, "Request validation failed.",
                           errors=["$.source: expected container or system"])
        tail = int(raw)
        kept = [(s, line) for s, line in self._pod_logs.get(pod_id, []) if source in (None, s)]
        lines = kept[-tail:] if tail else []
        now = _iso(self.clock())
        events = []
        for n, (source, line) in enumerate(lines, 1):
            data = json.dumps({"ts": now, "source": source, "line": line})
            events.append(f"id: {now}/{n:012d}\ndata: {data}\n\n")
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return _Reply(200, _LogStream("".join(events)), "text/event-stream", headers)

    def _stream_logs(self, handler: ApiHandler, reply: _Reply) -> None:
        """Write the backfill, then hold the stream open as RunPod does (no length: the
        stream ends when the connection closes)."""
        assert isinstance(reply.body, _LogStream)
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", reply.content_type)
            handler.send_header("Connection", "close")
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(reply.body.text.encode())
            handler.wfile.flush()
            self._stopping.wait(self.log_hold_s)
        except (BrokenPipeError, ConnectionResetError):
            pass
        handler.close_connection = True

    def _delete(self, pod_id: str) -> _Reply:
        pod = self._pods.get(pod_id)
        if pod is None or pod.deleted:
            return problem(404, "pod not found")
        pod.deleted = True
        pod.destroyed_by = self._actor
        pod.lingering = self._linger
        self.deleted_event.set()
        return _Reply(204, None)

    def _secret_create(self, body: Any) -> _Reply:
        if not isinstance(body, dict):
            return problem(400, "Request validation failed.", errors=["$: expected an object"])
        errors = [f"$: additional properties '{k}' not allowed" for k in body
                  if k not in _SECRET_FIELDS]
        name, value = body.get("name"), body.get("value")
        description = body.get("description", "")
        if not isinstance(name, str) or not 1 <= len(name) <= 191 or not SECRET_NAME.match(name):
            errors.append("$.name: 1-191 characters of ^[a-zA-Z_][a-zA-Z0-9_.\\-/]*$")
        elif name.upper().startswith("RUNPOD"):
            errors.append("$.name: names beginning with RUNPOD are reserved")
        if not isinstance(value, str) or len(value.encode()) >= _SECRET_VALUE_MAX:
            errors.append("$.value: a string under 16 MiB")
        if not isinstance(description, str) or len(description.encode()) > 65535:
            errors.append("$.description: a string of at most 65535 bytes")
        if errors:
            return problem(400, "Request validation failed.", errors=errors)
        if any(s["name"] == name for s in self._secrets.values()):
            return problem(409, f"a secret named {name} exists already")
        secret_id = f"sec{self._next_secret:04d}{secrets.token_hex(4)}"
        self._next_secret += 1
        self._secrets[secret_id] = {
            "name": name, "value": value, "description": description,
            "createdAt": _iso(self.clock()),
        }
        return _Reply(201, self._secret_view(secret_id, self._secrets[secret_id]))

    def _secret_delete(self, secret_id: str) -> _Reply:
        if self._secrets.pop(secret_id, None) is None:
            return problem(404, "secret not found")
        self.deleted_secrets.append(secret_id)
        return _Reply(204, None)

    @staticmethod
    def _secret_view(secret_id: str, secret: dict[str, Any]) -> dict[str, Any]:
        view = {k: v for k, v in secret.items() if k != "value"}  # write-only: never returned
        return {"id": secret_id, **view, "updatedAt": secret["createdAt"]}

    def _ssh_keys(self) -> _Reply:
        return _Reply(200, {"keys": list(self.account_keys)})

    def _ssh_keys_put(self, body: Any) -> _Reply:
        keys = body.get("keys") if isinstance(body, dict) else None
        pattern = re.compile(r"^(ssh|ecdsa|sk)-[^\s]+ [^\s]+([ \t][^\n\r]*)?$")
        if not isinstance(keys, list) or not all(
            isinstance(k, str) and pattern.match(k) for k in keys
        ):
            return problem(422, "Request validation failed.", errors=["$.keys: invalid"])
        self.account_keys = list(keys)
        return _Reply(200, {"keys": list(self.account_keys)})

    def _billing(self, query: dict[str, str]) -> _Reply:
        pod_id = query.get("podId")
        records = []
        for pid, pod in self._pods.items():
            if pod_id and pid != pod_id:
                continue
            amount = round(float(pod.row["cost"]) * 0.01, 4)
            records.append(
                {
                    "startTime": pod.row["createdAt"],
                    "endTime": _iso(self.clock()),
                    "podId": pid,
                    "totalAmount": amount,
                    "gpuAmount": amount,
                    "cpuAmount": 0,
                    "diskAmount": 0,
                }
            )
        total = round(sum(r["totalAmount"] for r in records), 4)
        metadata = {
            "query": {
                "startTime": min((r["startTime"] for r in records), default=_iso(self.clock())),
                "endTime": _iso(self.clock()),
                "bucketSize": "day",
                **({"podId": pod_id} if pod_id else {}),
            },
            "recordCount": len(records),
            "totals": {"totalAmount": total, "gpuAmount": total, "cpuAmount": 0, "diskAmount": 0},
            "uniquePodCount": len({r["podId"] for r in records}),
        }
        return _Reply(200, {"records": records, "metadata": metadata})

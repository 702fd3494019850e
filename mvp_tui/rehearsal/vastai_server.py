"""`FakeVast`: a stateful Vast.ai API on loopback, for tests and the official CLI alike.

A real HTTP server (stdlib `ThreadingHTTPServer` on 127.0.0.1:0, in a daemon thread), so it
serves async tests, sync tests and subprocess clients such as the `vastai` CLI. It answers
with the real paths, status codes and bodies of /work/shared/reference/vastai.md, always
with `Content-Type: application/json` exactly (the CLI compares it by string equality).

State: offers (an offer can be rented once), instances that move `loading → running` after
`loading_polls` observations (show or list: deterministic, no wall clock), account SSH keys
and credit. Faults are scripted per operation (`script`, `rate_limit`, `fail_destroy`, …);
the operation names are "search", "create", "show", "list", "destroy", "ssh_list",
"ssh_create", "user", plus "manage" (PUT /instances/{id}/) and "gpu_names".

Instance-scoped keys (Vast's CONTAINER_API_KEY): every instance gets its own random key
(`instance_env`, `write_instance_env` give it to the "node"); it is accepted only on that
instance's own show and destroy. Any other use answers 401 and lands in `scope_violations`.
`destroyed_by` tells whether the account key or the instance's own key destroyed it.
`onstart_of` and `container_env` give a test what the instance's container starts with (its
recorded onstart and env), so the real start script runs as Vast would run it; a create whose
`args` + `args_str` + `onstart` exceed Vast's 4096 characters is refused (400 invalid_args).
"""

from __future__ import annotations

import base64
import binascii
import copy
import http
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mvp_tui.rehearsal.http_fake import ApiHandler, Reply

JSON = "application/json"
PAGE_MAX = 25
ONSTART_CAP = 4096  # args + args_str + onstart, in characters
# Columns the v1 list cannot filter on (computed server-side): Vast answers 400.
_COMPUTED_COLUMNS = {"dph_total", "num_gpus", "dph_base", "duration"}
_THRESHOLDS = {
    "search": "10 per minute",
    "create": "4.5",
    "show": "2.0",
    "list": "1.0",
    "destroy": "3.0",
    "ssh_list": "1.0",
    "ssh_create": "1.0",
    "user": "1.0",
    "manage": "1.0",
    "gpu_names": "1.0",
}


@dataclass
class Fault:
    """One scripted answer for one call of an operation."""

    status: int = 500
    body: Any = None  # JSON value (or str for a raw text body); None → realistic default
    delay_s: float = 0.0  # wait before answering (the fake's own scripted latency)
    perform: bool = False  # do the real operation first, then answer with this fault
    drop: bool = False  # close the connection with no answer (after performing if perform)
    content_type: str | None = None  # None → application/json for JSON, text/plain for str


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON, the raw text when not JSON, or None when empty


_Reply = Reply


@dataclass
class _Instance:
    row: dict[str, Any]
    offer_id: int
    polls: int = 0
    destroyed: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    # Its own CONTAINER_API_KEY: valid only for this instance's show and destroy.
    key: str = field(default_factory=lambda: "inst-" + secrets.token_hex(24))
    destroyed_by: str | None = None  # "account" | "instance", once destroyed
    lingering: int = 0  # show/list answers that still show it after its destroy was accepted


def _in_scope(instance_id: int, op: str | None, path: str) -> bool:
    """An instance key may only show or destroy its own instance."""
    return op in ("show", "destroy") and path.rstrip("/").split("/")[-1] == str(instance_id)


def _error(status: int, code: str, msg: str, **extra: Any) -> _Reply:
    return _Reply(status, {"success": False, "error": code, "msg": msg, **extra})


def _ask_gone_404(ask: Any) -> _Reply:
    msg = f"error 404/3603: no_such_ask Instance type by id {ask} is not available."
    return _error(404, "invalid_args", msg, ask_id=ask)


def _ask_gone_410(ask: Any) -> _Reply:
    msg = f"error 410/3907: no_such_ask Instance type {ask} is no longer available."
    return _error(410, "no_such_ask", msg, ask_id=ask)


def _ask_not_yours_403(ask: Any) -> _Reply:
    msg = f"error 403/3586: Offer {ask} is not your own. Hosts can only rent their own machines."
    return _error(403, "invalid_args", msg, ask_id=ask)


def _ask_invalid_400(
    ask: Any, why: str = "'id' is required and must be a valid offer ID"
) -> _Reply:
    return _error(400, "invalid_args", f"error 400/3467: Invalid args: {why}", ask_id=ask)


_CREATE_ERRORS = {
    404: _ask_gone_404,
    410: _ask_gone_410,
    403: _ask_not_yours_403,
    400: _ask_invalid_400,
}


def _default_offer(offer_id: int) -> dict[str, Any]:
    """A full bundles row with realistic values (field names from Vast's bundles search answer)."""
    now = time.time()
    return {
        "id": offer_id,
        "ask_contract_id": offer_id,
        "bundle_id": offer_id * 10,
        "bundled_results": 1,
        "machine_id": 40000 + offer_id % 10000,
        "host_id": 50000 + offer_id % 10000,
        "num_gpus": 1,
        "gpu_name": "RTX 4090",
        "gpu_arch": "nvidia",
        "gpu_ram": 24564,
        "gpu_total_ram": 24564,
        "gpu_frac": 1.0,
        "gpu_mem_bw": 908.1,
        "gpu_display_active": False,
        "compute_cap": 890,
        "cuda_max_good": 12.8,
        "driver_version": "570.124.04",
        "cpu_name": "AMD EPYC 7543 32-Core Processor",
        "cpu_arch": "amd64",
        "cpu_cores": 64,
        "cpu_cores_effective": 16.0,
        "cpu_ghz": 3.7,
        "cpu_ram": 128785,
        "disk_space": 512.0,
        "disk_bw": 3500.0,
        "disk_name": "Samsung SSD 980 PRO 2TB",
        "pci_gen": 4.0,
        "pcie_bw": 24.6,
        "bw_nvlink": 0.0,
        "inet_down": 812.3,
        "inet_up": 640.1,
        "inet_down_cost": 0.003,
        "inet_up_cost": 0.003,
        "internet_down_cost_per_tb": 3.0,
        "internet_up_cost_per_tb": 3.0,
        "direct_port_count": 100,
        "dph_base": 0.33,
        "dph_total": 0.3521,
        "discounted_dph_total": 0.3521,
        "min_bid": 0.15,
        "storage_cost": 0.15,
        "storage_total_cost": 0.0104,
        "dlperf": 58.2,
        "dlperf_per_dphtotal": 165.3,
        "flops_per_dphtotal": 234.1,
        "total_flops": 82.4,
        "score": 210.4,
        "reliability": 0.995,
        "reliability2": 0.995,
        "verification": "verified",
        "verified": True,
        "rentable": True,
        "rented": False,
        "is_bid": False,
        "external": False,
        "datacenter": False,
        "hosting_type": 0,
        "static_ip": True,
        "public_ipaddr": "127.0.0.1",
        "geolocation": "Texas, US",
        "geolocode": 840,
        "duration": 2592000.0,
        "start_date": now - 86400,
        "end_date": now + 2592000,
        "os_version": "22.04",
        "ubuntu_version": "22.04",
        "vms_enabled": False,
        "has_avx": 1,
        "webpage": None,
        "logo": "/static/logos/vastai_small2.png",
    }


def _gt(v: Any, w: Any) -> bool:
    return v is not None and bool(v > w)


def _gte(v: Any, w: Any) -> bool:
    return v is not None and bool(v >= w)


def _lt(v: Any, w: Any) -> bool:
    return v is not None and bool(v < w)


def _lte(v: Any, w: Any) -> bool:
    return v is not None and bool(v <= w)


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda v, w: bool(v == w),
    "neq": lambda v, w: bool(v != w),
    "gt": _gt,
    "gte": _gte,
    "lt": _lt,
    "lte": _lte,
    "in": lambda v, w: v in w,
    "notin": lambda v, w: v not in w,
    "nin": lambda v, w: v not in w,
}


def _coerce(value: Any, want: Any) -> Any:
    """The CLI sends numbers as strings (`dph<1` → `{"lt": "1"}`); the server compares
    them as numbers. Lists (for in/notin) are coerced element-wise."""
    if isinstance(want, list):
        return [_coerce(value, w) for w in want]
    if isinstance(want, str) and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(want)
        except ValueError:
            return want
    if isinstance(want, str) and isinstance(value, bool) and want.lower() in ("true", "false"):
        return want.lower() == "true"
    return want


def _matches(value: Any, ops: Any) -> bool:
    """Apply one Vast filter (`{"gte": 4, "lte": 8}`) to a value; an unknown op fails."""
    if not isinstance(ops, dict):
        return bool(value == _coerce(value, ops))
    for op, raw_want in ops.items():
        if op == "eq" and raw_want in ("any", "*", "?"):
            continue
        want = _coerce(value, raw_want)
        check = _OPS.get(op)
        try:
            if check is None or not check(value, want):
                return False
        except TypeError:
            return False
    return True


def _sort(rows: list[dict[str, Any]], order: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    """Stable multi-key sort; `None` sorts last either way."""
    for column, descending in reversed(order):
        present = [r for r in rows if r.get(column) is not None]
        missing = [r for r in rows if r.get(column) is None]
        present.sort(key=lambda r, c=column: r[c], reverse=descending)  # type: ignore[misc]
        rows = present + missing
    return rows


ContainerStart = Callable[[int, "tuple[str, int, bool] | None", dict[str, str]], None]


class FakeVast:
    """The fake Vast.ai API. Use as a context manager; `url` is its base URL."""

    # The `on_container_start` every new fake gets (a test suite's harness sets it).
    default_container_start: ContainerStart | None = None

    def __init__(
        self, *, api_key: str = "fake-vast-key-0123456789", loading_polls: int = 1
    ) -> None:
        self.api_key = api_key
        self.loading_polls = loading_polls
        self.url = ""
        self.credit = 25.0
        self.account_keys: list[str] = []
        self.requests: list[RecordedRequest] = []
        # (host, port, direct): the SSH endpoint running instances report; None → defaults
        self.ssh_endpoint: tuple[str, int, bool] | None = None
        # Where the "container" environment of each new instance is written (its PID 1's
        # environ, NUL-separated: id and instance key), for a node agent to read.
        self.node_env_file: Path | None = None
        # Status of a wrong/missing key: 401 normally; set 404 for the variant Vast also sends.
        self.auth_error_status = 401
        # Shape of GET /ssh/: "list" (what SkyPilot sees) or "wrapped" ({"ssh_keys": [...]}).
        self.ssh_list_shape = "list"
        self.user_id = 424242
        # The fake's wall clock for instance start dates; tests that need fixed output set it.
        self.clock: Callable[[], float] = time.time
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._offers: dict[int, dict[str, Any]] = {}
        self._instances: dict[int, _Instance] = {}
        self._next_offer = 1001
        self._next_instance = 7001
        self._faults: dict[str, deque[Fault]] = {}
        self._rate_limited: dict[str, int] = {}
        self._destroy_failures: list[list[Any]] = []  # [instance_id | None, times, status]
        self._stick_loading: set[int] = set()
        self._die_on_start: set[int] = set()
        # Per offer: the SSH endpoint its running instances report (over `ssh_endpoint`),
        # and after how many running observations they exit (a host that fails late);
        # when each such instance first showed "exited".
        self.offer_ssh: dict[int, tuple[str, int, bool]] = {}
        # What an instance's container does as it starts (its onstart), played by whoever
        # runs the fake: called at create with the instance id, its SSH endpoint and its env.
        self.on_container_start: ContainerStart | None = FakeVast.default_container_start
        self._exit_after: dict[int, int] = {}
        self.exited_at: dict[int, float] = {}
        # Requests that used an instance key outside its own instance's show/destroy (401).
        self.scope_violations: list[RecordedRequest] = []
        self._actor = "account"  # whose key the operation running under the lock carries
        self._linger_after_destroy = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> FakeVast:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        fake = self

        class Handler(ApiHandler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # stop() returns within one poll interval
            name="fake-vast",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a scripted delay
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- control API ------------------------------------------------------------------------

    def add_offer(self, **fields: Any) -> int:
        """Add an offer (realistic defaults for every field); returns its ask id."""
        with self._lock:
            offer_id = int(fields.pop("id", self._next_offer))
            self._next_offer = max(self._next_offer, offer_id) + 1
            row = _default_offer(offer_id)
            row.update(fields)
            if "verification" in fields and "verified" not in fields:
                row["verified"] = fields["verification"] == "verified"
            self._offers[offer_id] = row
            return offer_id

    def remove_offer(self, offer_id: int) -> None:
        """The offer is sold or withdrawn: a create answers 404 no_such_ask (410 with
        cancel_unavail)."""
        with self._lock:
            self._offers.pop(offer_id, None)

    def script(self, op: str, *faults: Fault) -> None:
        """Queue faults for `op`; each call of `op` consumes one."""
        with self._lock:
            self._faults.setdefault(op, deque()).extend(faults)

    def rate_limit(self, op: str, times: int) -> None:
        """The next `times` calls of `op` answer 429 (before any scripted fault)."""
        with self._lock:
            self._rate_limited[op] = self._rate_limited.get(op, 0) + times

    def stick_loading(self, offer_id: int) -> None:
        """Instances created from this offer never leave "loading"."""
        with self._lock:
            self._stick_loading.add(offer_id)

    def die_on_start(self, offer_id: int) -> None:
        """Instances created from this offer go to "exited" instead of "running"."""
        with self._lock:
            self._die_on_start.add(offer_id)

    def exit_after_running(self, offer_id: int, observations: int) -> None:
        """Instances of this offer run, then show "exited" after `observations` shows or
        lists as running (the container died under the user)."""
        with self._lock:
            self._exit_after[offer_id] = observations

    def exit_instance(self, instance_id: int) -> None:
        """The instance's container exits now (the host lost it); it still bills storage."""
        with self._lock:
            inst = self._instances[instance_id]
            self._exit_after[inst.offer_id] = max(0, inst.polls - self.loading_polls - 1)

    def fail_destroy(self, instance_id: int | None, times: int, status: int = 500) -> None:
        """The next `times` destroys of `instance_id` (None = any) fail without destroying."""
        with self._lock:
            self._destroy_failures.append([instance_id, times, status])

    def linger_after_destroy(self, observations: int) -> None:
        """Instances destroyed from now on still show, as before, in the next `observations`
        show/list answers (the destroy is accepted and billing stops; the listing lags)."""
        with self._lock:
            self._linger_after_destroy = observations

    def patch_instance(self, instance_id: int, **fields: Any) -> None:
        """Force row fields of an instance (e.g. `ssh_host="unknown"`), over any progression."""
        with self._lock:
            self._instances[instance_id].overrides.update(fields)

    def add_instance(self, *, label: str | None = None, **fields: Any) -> int:
        """An instance already on the account (not from a create), running; returns its id."""
        offer_id = self.add_offer()
        with self._lock:
            offer = self._offers.pop(offer_id)
            inst = self._new_instance(offer, {"label": label, "image": "ubuntu:22.04"})
            inst.polls = self.loading_polls + 1
            inst.overrides.update(fields)
            return int(inst.row["id"])

    def instances(self) -> list[dict[str, Any]]:
        """Snapshot of live (not destroyed) instance rows, as the API would show them now
        (without counting as a poll)."""
        with self._lock:
            return [self._view(i) for i in self._instances.values() if not i.destroyed]

    def billing(self) -> list[dict[str, Any]]:
        """Instances that would bill now: every one not destroyed (stopped ones bill storage)."""
        return self.instances()

    def destroyed(self) -> list[int]:
        with self._lock:
            return [iid for iid, i in self._instances.items() if i.destroyed]

    def destroyed_by(self, instance_id: int) -> str | None:
        """Whose key destroyed the instance: "account", "instance" (its own key) or None."""
        with self._lock:
            return self._instances[instance_id].destroyed_by

    def instance_env(self, instance_id: int) -> dict[str, str]:
        """What Vast puts into the instance's container for it to act on itself."""
        with self._lock:
            key = self._instances[instance_id].key
        return {"CONTAINER_ID": str(instance_id), "CONTAINER_API_KEY": key}

    def onstart_of(self, instance_id: int) -> str | None:
        """The `onstart` script the instance was created with (what its container runs)."""
        with self._lock:
            onstart = self._instances[instance_id].row.get("onstart")
        return onstart if isinstance(onstart, str) else None

    def container_env(self, instance_id: int) -> dict[str, str]:
        """The environment the instance's container (and so its onstart) starts with: the
        create request's `env`, then what Vast adds (id, instance key, label)."""
        with self._lock:
            pairs = list(self._instances[instance_id].row.get("extra_env") or [])
        env = {str(k): str(v) for k, v in pairs}
        env.update(self.instance_env(instance_id), VAST_CONTAINERLABEL=f"C.{instance_id}")
        return env

    def write_instance_env(self, instance_id: int, path: str | Path) -> Path:
        """The container's environment as /proc/1/environ holds it (NUL-separated), with
        the instance's id and key among a few harmless variables."""
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            **self.instance_env(instance_id),
            "VAST_CONTAINERLABEL": f"C.{instance_id}",
        }
        target = Path(path)
        target.write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
        return target

    def offers(self) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(o) for o in self._offers.values()]

    # -- state machine ----------------------------------------------------------------------

    def _new_instance(self, offer: dict[str, Any], body: dict[str, Any]) -> _Instance:
        instance_id = self._next_instance
        self._next_instance += 1
        raw_env = body.get("env")
        env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
        runtype = str(body.get("runtype") or "ssh")
        is_bid = body.get("price") is not None
        row: dict[str, Any] = {
            "id": instance_id,
            "machine_id": offer["machine_id"],
            "host_id": offer["host_id"],
            "bundle_id": offer.get("bundle_id"),
            "actual_status": None,
            "intended_status": "running",
            "cur_state": "running",
            "next_state": "running",
            "status_msg": None,
            "label": body.get("label"),
            "image_uuid": body.get("image"),
            "image_runtype": runtype,
            "image_args": body.get("args") or [],
            "onstart": body.get("onstart"),
            "extra_env": [[k, v] for k, v in env.items() if not str(k).startswith("-")],
            "template_id": None,
            "template_hash_id": None,
            "ssh_idx": str(instance_id % 20),
            "ssh_host": "127.0.0.1",
            "ssh_port": 10000 + instance_id % 50000,
            "public_ipaddr": offer.get("public_ipaddr", "127.0.0.1"),
            "local_ipaddrs": "127.0.0.1 ",
            "ports": None,
            "direct_port_start": -1,
            "direct_port_end": -1,
            "direct_port_count": offer.get("direct_port_count", 0),
            "machine_dir_ssh_port": -1,
            "dph_total": offer["dph_total"],
            "dph_base": offer.get("dph_base"),
            "is_bid": is_bid,
            "min_bid": offer.get("min_bid"),
            "gpu_name": offer["gpu_name"],
            "num_gpus": offer["num_gpus"],
            "gpu_ram": offer["gpu_ram"],
            "gpu_totalram": offer.get("gpu_total_ram"),
            "gpu_util": None,
            "gpu_temp": None,
            "cpu_name": offer.get("cpu_name"),
            "cpu_ram": offer.get("cpu_ram"),
            "cpu_cores": offer.get("cpu_cores"),
            "cpu_util": None,
            "disk_space": float(body.get("disk") or 10.0),
            "disk_usage": -1,
            "disk_util": -1,
            "inet_down": offer.get("inet_down"),
            "inet_up": offer.get("inet_up"),
            "geolocation": offer.get("geolocation"),
            "verification": offer.get("verification"),
            "reliability2": offer.get("reliability2"),
            "cuda_max_good": offer.get("cuda_max_good"),
            "compute_cap": offer.get("compute_cap"),
            "driver_version": offer.get("driver_version"),
            "jupyter_token": "a" * 64,
            "start_date": self.clock(),
            "end_date": offer.get("end_date"),
            "uptime_mins": None,
            "volume_info": None,
        }
        inst = _Instance(row=row, offer_id=int(offer["id"]))
        self._instances[instance_id] = inst
        return inst

    def _advance(self, inst: _Instance) -> None:
        """One observation of the instance (a show or a list that includes it)."""
        if not inst.destroyed:
            inst.polls += 1

    def _view(self, inst: _Instance, ahead: int = 0) -> dict[str, Any]:
        """The row as the API shows it after `inst.polls + ahead` observations."""
        row = copy.deepcopy(inst.row)
        if row["intended_status"] == "stopped":
            row.update(actual_status="stopped", cur_state="stopped", next_state="stopped")
        elif inst.polls + ahead <= self.loading_polls or inst.offer_id in self._stick_loading:
            row.update(
                actual_status="loading",
                status_msg="afad30e59d72: Pulling fs layer",
                disk_usage=0.1,
            )
        elif inst.offer_id in self._die_on_start or self._exited_late(inst, ahead):
            row.update(
                actual_status="exited",
                status_msg="Error response from daemon: failed to create task for container: "
                "OCI runtime create failed: unable to start container process",
            )
        else:
            self._show_running(inst, row)
        row.update(copy.deepcopy(inst.overrides))
        return row

    def _exited_late(self, inst: _Instance, ahead: int) -> bool:
        limit = self._exit_after.get(inst.offer_id)
        if limit is None or inst.polls + ahead <= self.loading_polls + limit:
            return False
        self.exited_at.setdefault(int(inst.row["id"]), self.clock())
        return True

    def _show_running(self, inst: _Instance, row: dict[str, Any]) -> None:
        row.update(
            actual_status="running",
            status_msg=f"success, running {row['image_uuid']}/ssh",
            uptime_mins=1.0,
            disk_usage=2.1,
            gpu_util=0.0,
        )
        direct_runtype = "direc" in str(row["image_runtype"])
        endpoint = self.offer_ssh.get(inst.offer_id, self.ssh_endpoint)
        if endpoint is not None:
            host, port, direct = endpoint
            if direct:
                row["public_ipaddr"] = host
                row["ports"] = {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(port)}]}
                row["direct_port_start"], row["direct_port_end"] = port, port + 9
            else:
                row["ssh_host"], row["ssh_port"] = host, port
            return
        if direct_runtype and int(row.get("direct_port_count") or 0) >= 1:
            start = 40000 + (int(row["id"]) % 1000) * 10
            row["ports"] = {
                "22/tcp": [
                    {"HostIp": "0.0.0.0", "HostPort": str(start)},
                    {"HostIp": "::", "HostPort": str(start)},
                ]
            }
            row["direct_port_start"], row["direct_port_end"] = start, start + 9
            row["machine_dir_ssh_port"] = start

    # -- dispatch (called from handler threads) ---------------------------------------------

    def _handle(self, handler: ApiHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        path = parts.path.rstrip("/") or "/"
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
        with self._lock:
            self.requests.append(RecordedRequest(method, parts.path, query, headers, body))
        op, perform = self._route(method, path, query, body, body_ok)
        owner = self._instance_key_owner(headers, query)
        if owner is not None and not _in_scope(owner, op, path):
            with self._lock:
                self.scope_violations.append(
                    RecordedRequest(method, parts.path, query, headers, body)
                )
            handler.reply(_error(401, "auth_error", "Invalid user key"))
            return
        if op is None:
            handler.reply(_error(404, "not_found", f"{method} {parts.path} is not an API path"))
            return
        if owner is None and not self._authorised(op, headers, query):
            handler.reply(_error(self.auth_error_status, "auth_error", "Invalid user key"))
            return
        if owner is not None:
            perform = self._acting_as("instance", perform)
        with self._lock:
            limited = self._rate_limited.get(op, 0)
            if limited:
                self._rate_limited[op] = limited - 1
            fault = None if limited else self._next_fault(op, method, path)
        if limited:
            handler.reply(self._rate_limit_reply(op))
            return
        if fault is None:
            handler.reply(self._perform(perform))
            return
        if fault.perform:
            self._perform(perform)
        if fault.delay_s and self._stopping.wait(fault.delay_s):
            return
        if fault.drop:
            handler.drop()
            return
        handler.reply(self._fault_reply(op, fault, path))

    def _perform(self, operation: Any) -> _Reply:
        """Run one operation under the lock; a bug in the fake answers 500, not a hang."""
        with self._lock:
            try:
                reply: _Reply = operation()
            except Exception as exc:  # the fake must answer whatever happens
                reply = _error(500, "server_error", f"fake Vast bug: {exc!r}")
        return reply

    def _next_fault(self, op: str, method: str, path: str) -> Fault | None:
        queue = self._faults.get(op)
        if queue:
            return queue.popleft()
        if op == "destroy":
            instance_id = int(path.split("/")[-1])
            for entry in self._destroy_failures:
                target, times, status = entry
                if times > 0 and target in (None, instance_id):
                    entry[1] = times - 1
                    return Fault(status=status)
        return None

    def _instance_key_owner(self, headers: dict[str, str], query: dict[str, str]) -> int | None:
        """The instance whose own key the request carries (Bearer or ?api_key=), if any."""
        auth = headers.get("authorization") or ""
        key = auth[len("Bearer ") :] if auth.startswith("Bearer ") else query.get("api_key")
        if not key:
            return None
        with self._lock:
            for instance_id, inst in self._instances.items():
                if inst.key == key:
                    return instance_id
        return None

    def _acting_as(self, actor: str, operation: Any) -> Any:
        """`operation`, run (under the lock, by _perform) on behalf of `actor`."""

        def run() -> _Reply:
            self._actor = actor
            try:
                reply: _Reply = operation()
                return reply
            finally:
                self._actor = "account"

        return run

    def _authorised(self, op: str, headers: dict[str, str], query: dict[str, str]) -> bool:
        auth = headers.get("authorization")
        if op == "search" and auth is None and "api_key" not in query:
            return True  # Vast serves offer search without any key
        if auth is not None:
            return auth == f"Bearer {self.api_key}"
        return query.get("api_key") == self.api_key  # the legacy query parameter

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any, body_ok: bool
    ) -> tuple[str | None, Any]:
        """(operation name, a thunk that performs it and returns the reply)."""
        segments = path.strip("/").split("/")
        if segments[:2] == ["api", "v0"]:
            rest = segments[2:]
        elif segments[:2] == ["api", "v1"]:
            rest = ["v1", *segments[2:]]
        else:
            return None, None
        bad_json = _error(400, "invalid_request", "Invalid json body")

        def guarded(fn: Any, *args: Any) -> Any:
            return (lambda: bad_json) if not body_ok else (lambda: fn(*args))

        match method, rest:
            case ("POST", ["bundles"]):
                return "search", guarded(self._search, body)
            case ("GET", ["bundles"]):
                return "search", lambda: self._search(json.loads(query.get("q", "{}") or "{}"))
            case ("PUT", ["search", "asks"]):
                q = body.get("q") if isinstance(body, dict) else None
                return "search", guarded(self._search, q)
            case ("PUT", ["asks", ask]) if ask.isdigit():
                return "create", guarded(self._create, int(ask), body)
            case ("GET", ["instances"]):
                return "list_v0", self._deprecated_list
            case ("GET", ["instances", iid]) if iid.isdigit():
                return "show", lambda: self._show(int(iid))
            case ("PUT", ["instances", iid]) if iid.isdigit():
                return "manage", guarded(self._manage, int(iid), body)
            case ("DELETE", ["instances", iid]) if iid.isdigit():
                return "destroy", lambda: self._destroy(int(iid))
            case ("DELETE", ["instances"]):
                return "destroy_bulk", guarded(self._destroy_bulk, body)
            case ("GET", ["v1", "instances"]):
                return "list", lambda: self._list(query)
            case ("GET", ["ssh"]):
                return "ssh_list", self._ssh_list
            case ("POST", ["ssh"]):
                return "ssh_create", guarded(self._ssh_create, body)
            case ("GET", ["users", "current"]):
                return "user", self._user
            case ("GET", ["gpu_names", "unique"]):
                return "gpu_names", self._gpu_names
        return None, None

    # -- operations (run under the lock) ----------------------------------------------------

    def _search(self, query: Any) -> _Reply:
        if not isinstance(query, dict):
            return _error(400, "invalid_request", "Invalid json body")
        rows = [o for o in self._offers.values()]
        reserved = {"order", "type", "limit", "allocated_storage", "disable_bundling", "extra_ids"}
        for column, ops in query.items():
            if column in reserved:
                continue
            rows = [r for r in rows if column not in r or _matches(r[column], ops)]
        order = query.get("order") or [["score", "desc"]]
        keys = [
            (str(o[0]), len(o) > 1 and str(o[1]).lower() == "desc")
            for o in order
            if isinstance(o, list) and o
        ]
        rows = _sort(rows, keys)
        limit = query.get("limit")
        # Without a limit the server answers a small page (gpuhunt saw 64).
        rows = rows[:limit] if isinstance(limit, int) and limit > 0 else rows[:64]
        return _Reply(200, {"offers": copy.deepcopy(rows)})

    def _create(self, ask_id: int, body: Any) -> _Reply:
        if not isinstance(body, dict):
            return _ask_invalid_400(ask_id, "body must be a JSON object")
        offer = self._offers.get(ask_id)
        if offer is not None and not offer.get("rentable", True) and body.get("cancel_unavail"):
            # It exists but cannot start now, and the client asked for an error rather than
            # a stopped instance.
            return _ask_gone_410(ask_id)
        if offer is None or not offer.get("rentable", True):
            return _ask_gone_404(ask_id)
        image = body.get("image")
        if not isinstance(image, str) or not image or len(image) > 1024:
            return _ask_invalid_400(ask_id, "'image' is required")
        label = body.get("label")
        if label is not None and (not isinstance(label, str) or len(label) > 256):
            return _ask_invalid_400(ask_id, "label must be a string of at most 256 characters")
        start_chars = sum(len(a) for a in body.get("args") or [] if isinstance(a, str))
        start_chars += len(str(body.get("args_str") or "")) + len(str(body.get("onstart") or ""))
        if start_chars > ONSTART_CAP:
            # The cap is documented (reference/vastai.md §3); the exact answer is not: this one
            # is Vast's invalid_args shape.
            return _ask_invalid_400(
                ask_id, f"args + args_str + onstart exceed {ONSTART_CAP} characters"
            )
        disk = body.get("disk", 10)
        if not isinstance(disk, int | float) or disk < 8:
            return _ask_invalid_400(ask_id, "disk must be a number >= 8")
        if self.credit <= 0:
            return _error(400, "insufficient_credit", "Your balance is too low", ask_id=ask_id)
        price = body.get("price")
        offer["rentable"] = False
        offer["rented"] = True
        self._offers.pop(ask_id)
        inst = self._new_instance(offer, body)
        instance_id = int(inst.row["id"])
        if self.node_env_file is not None:
            self.write_instance_env(instance_id, self.node_env_file)
        start = self.on_container_start
        if start is not None:  # the instance's start command, as the test harness plays it
            raw_env = body.get("env")
            env = {str(k): str(v) for k, v in raw_env.items()} if isinstance(raw_env, dict) else {}
            start(instance_id, self.offer_ssh.get(ask_id, self.ssh_endpoint), env)
        if isinstance(price, int | float) and price < float(offer.get("min_bid") or 0):
            # Vast creates the instance stopped and reports an error with its id (dstack).
            inst.row.update(intended_status="stopped", cur_state="stopped", next_state="stopped")
            return _Reply(
                200,
                {
                    "success": False,
                    "error": "bid_too_low",
                    "msg": "Your bid is below the minimum; the instance was created stopped.",
                    "new_contract": instance_id,
                },
            )
        return _Reply(200, {"success": True, "new_contract": instance_id})

    def _show(self, instance_id: int) -> _Reply:
        inst = self._instances.get(instance_id)
        if inst is None or (inst.destroyed and inst.lingering <= 0):
            return _Reply(200, {"instances": None})
        inst.lingering -= 1 if inst.destroyed else 0
        self._advance(inst)
        return _Reply(200, {"instances": self._view(inst)})

    def _deprecated_list(self) -> _Reply:
        return _error(
            410,
            "deprecated_endpoint",
            "/api/v0/instances/ is deprecated. Use /api/v1/instances/ instead.",
        )

    def _list(self, query: dict[str, str]) -> _Reply:
        try:
            filters = json.loads(query.get("select_filters") or "{}")
            order_by = json.loads(query.get("order_by") or "[]")
            limit = int(query.get("limit") or 25)
        except ValueError:
            return _error(400, "invalid_request", "Error in query parameters: not valid JSON")
        if not isinstance(filters, dict) or not isinstance(order_by, list):
            return _error(400, "invalid_request", "Error in query parameters")
        for column in filters:
            if column in _COMPUTED_COLUMNS:
                return _error(
                    400,
                    "invalid_request",
                    f"Error in query parameters: {column} is not a valid search key",
                )
        limit = 5 if limit <= 0 else min(limit, PAGE_MAX)
        offset = 0
        token = query.get("after_token")
        if token:
            try:
                offset = int(json.loads(base64.urlsafe_b64decode(token))["offset"])
            except (ValueError, KeyError, TypeError, binascii.Error):
                return _error(400, "invalid_token", "Invalid pagination token")
        live = [i for i in self._instances.values() if not i.destroyed or i.lingering > 0]
        for lingering in (i for i in live if i.destroyed):
            lingering.lingering -= 1
        views = [self._view(i, ahead=1) for i in live]  # as this poll will see them
        matching = [v for v in views if all(_matches(v.get(c), ops) for c, ops in filters.items())]
        keys = [
            (str(o.get("col")), str(o.get("dir", "asc")).lower() == "desc")
            for o in order_by
            if isinstance(o, dict) and o.get("col")
        ]
        if not any(c == "id" for c, _ in keys):
            keys.append(("id", False))
        matching = _sort(matching, keys)
        page = matching[offset : offset + limit]
        by_id = {int(i.row["id"]): i for i in live}
        for row in page:
            self._advance(by_id[int(row["id"])])
        select = query.get("select_cols")
        if select:
            cols = json.loads(select)
            if isinstance(cols, list) and cols != ["*"]:
                page = [{c: r.get(c) for c in cols} for r in page]
        nxt = offset + limit
        next_token = (
            base64.urlsafe_b64encode(json.dumps({"v": 1, "offset": nxt}).encode()).decode()
            if nxt < len(matching)
            else None
        )
        label_counts: dict[str, int] = {}
        for v in views:
            key = v.get("label") or ""
            label_counts[key] = label_counts.get(key, 0) + 1
        return _Reply(
            200,
            {
                "success": True,
                "instances_found": len(matching),
                "total_instances": len(views),
                "label_counts": label_counts,
                "next_token": next_token,
                "instances": page,
            },
        )

    def _manage(self, instance_id: int, body: Any) -> _Reply:
        inst = self._instances.get(instance_id)
        if inst is None or inst.destroyed:
            return _error(404, "no_such_instance", f"Instance {instance_id} not found.")
        if not isinstance(body, dict):
            return _error(400, "invalid_args", "Invalid args")
        if "label" in body:
            label = body["label"]
            if isinstance(label, str) and len(label) > 1024:
                return _error(
                    400,
                    "label_too_long",
                    "Please limit label length to 1024 characters, ideally less than 128.",
                )
            inst.row["label"] = label
            return _Reply(
                200, {"success": True, "msg": f"label for {instance_id} set to '{label}'"}
            )
        if body.get("state") in ("running", "stopped"):
            state = body["state"]
            inst.row.update(intended_status=state, cur_state=state, next_state=state)
            return _Reply(200, {"success": True})
        return _error(400, "invalid_args", "Invalid args: nothing to change")

    def _destroy(self, instance_id: int) -> _Reply:
        inst = self._instances.get(instance_id)
        if inst is None or inst.destroyed:
            return _error(404, "no_such_instance", f"Instance {instance_id} not found.")
        inst.destroyed = True
        inst.destroyed_by = self._actor
        inst.lingering = self._linger_after_destroy
        return _Reply(200, {"success": True, "msg": f"destroying instance {instance_id}."})

    def _destroy_bulk(self, body: Any) -> _Reply:
        ids = body.get("instance_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list):
            return _error(400, "invalid_args", "instance_ids is required")
        for iid in ids:
            inst = self._instances.get(int(iid))
            if inst is not None:
                inst.destroyed_by = inst.destroyed_by or self._actor
                inst.destroyed = True
        return _Reply(200, {"success": True})

    def _key_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "id": 900 + n,
                "user_id": self.user_id,
                "public_key": text,
                "created_at": "2026-01-01T00:00:00Z",
                "deleted_at": None,
            }
            for n, text in enumerate(self.account_keys)
        ]

    def _ssh_list(self) -> _Reply:
        rows = self._key_rows()
        if self.ssh_list_shape == "wrapped":
            return _Reply(
                200, {"ssh_keys": [{"id": r["id"], "ssh_key": r["public_key"]} for r in rows]}
            )
        return _Reply(200, rows)

    def _ssh_create(self, body: Any) -> _Reply:
        text = body.get("ssh_key") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return _error(400, "no_ssh_key", "No ssh key provided")
        self.account_keys.append(text.replace("\x00", ""))
        return _Reply(200, {"success": True, "key": self._key_rows()[-1]})

    def _user(self) -> _Reply:
        return _Reply(
            200,
            {
                "id": self.user_id,
                "username": "fake-user",
                "email": "fake-user@example.invalid",
                "fullname": "Fake User",
                "credit": self.credit,
                "balance": 0.0,
                "can_pay": self.credit > 0,
                "has_billing": True,
                "host_agreement_accepted": False,
                "ssh_key": self.account_keys[0] if self.account_keys else None,
                "sshkey": self.account_keys[0] if self.account_keys else None,
                "is_team": False,
            },
        )

    def _gpu_names(self) -> _Reply:
        names = sorted({str(o["gpu_name"]) for o in self._offers.values()} | {"RTX 4090"})
        return _Reply(200, {"gpu_names": names})

    # -- faults -----------------------------------------------------------------------------

    def _rate_limit_reply(self, op: str) -> _Reply:
        threshold = _THRESHOLDS.get(op, "1.0")
        if op == "destroy":
            return _error(
                429,
                "rate_limit_exceeded",
                f"API requests too frequent endpoint threshold={threshold}",
            )
        return _Reply(429, {"detail": f"API requests too frequent endpoint threshold={threshold}"})

    def _fault_reply(self, op: str, fault: Fault, path: str) -> _Reply:
        body = fault.body if fault.body is not None else self._default_body(op, fault.status, path)
        if fault.content_type is not None:
            content_type = fault.content_type
        elif isinstance(body, str):
            content_type = "text/plain; charset=utf-8"
        else:
            content_type = JSON
        return _Reply(fault.status, body, content_type)

    def _default_body(self, op: str, status: int, path: str) -> Any:
        """What Vast really answers with `status` for this operation."""
        ident = path.rstrip("/").split("/")[-1]
        if status == 429:
            return self._rate_limit_reply(op).body
        if status in (401,):
            return {"success": False, "error": "auth_error", "msg": "Invalid user key"}
        if op == "create" and status in _CREATE_ERRORS:
            return _CREATE_ERRORS[status](ident).body
        if op in ("destroy", "show", "manage") and status == 404:
            return {
                "success": False,
                "error": "no_such_instance",
                "msg": f"Instance {ident} not found.",
            }
        if status >= 500:
            return {
                "success": False,
                "error": "server_error",
                "msg": http.HTTPStatus(status).phrase,
            }
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        return {"success": False, "error": "error", "msg": phrase}

"""The fake Vast.ai's account state and API operations: instances that move `loading →
running` by observations, and what each API path does to them, run under the fake's lock.

`VastOperations` is the half of `FakeVast` (vastai_server.py) that the API paths act on; the
other half serves HTTP, plays scripted faults and gives tests their control calls."""

from __future__ import annotations

import base64
import binascii
import copy
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mvp_tui.rehearsal.http_fake import Reply
from mvp_tui.rehearsal.vast_offers import matches, priced, search_offers, sort_rows
from mvp_tui.rehearsal.vast_replies import (
    ask_gone_404,
    ask_gone_410,
    ask_invalid_400,
    error_reply,
)

PAGE_MAX = 25
ONSTART_CAP = 4096  # args + args_str + onstart, in characters
# Columns the v1 list cannot filter on (computed server-side): Vast answers 400.
COMPUTED_COLUMNS = {"dph_total", "num_gpus", "dph_base", "duration"}

ContainerStart = Callable[[int, "tuple[str, int, bool] | None", dict[str, str]], None]


@dataclass
class Instance:
    row: dict[str, Any]
    offer_id: int
    polls: int = 0
    destroyed: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    # Its own CONTAINER_API_KEY: valid only for this instance's show, start/stop and destroy.
    key: str = field(default_factory=lambda: "inst-" + secrets.token_hex(24))
    destroyed_by: str | None = None  # "account" | "instance", once destroyed
    lingering: int = 0  # show/list answers that still show it after its destroy was accepted


def in_scope(
    instance_id: int, op: str | None, path: str, body: Any = None,
    query: dict[str, str] | None = None,
) -> bool:
    """An instance key may only show, start, stop or destroy its own instance (Vast's docs:
    it "can only start, stop, or destroy that specific instance", and read it). Read through
    the v1 list, it may ask for its own row only (`select_filters` `{"id": {"eq": <own>}}`):
    whether Vast lets it is not documented; the fake takes the narrowest reading that lets
    a node confirm its own end once the v0 read is retired."""
    if op == "list":
        return _own_id_filter(instance_id, (query or {}).get("select_filters"))
    own = path.rstrip("/").split("/")[-1] == str(instance_id)
    state_only = isinstance(body, dict) and set(body) == {"state"}
    return own and (op in ("show", "destroy") or (op == "manage" and state_only))


def _own_id_filter(instance_id: int, raw: str | None) -> bool:
    try:
        filters = json.loads(raw or "")
    except ValueError:
        return False
    if not isinstance(filters, dict) or set(filters) != {"id"}:
        return False
    wanted = filters["id"].get("eq") if isinstance(filters["id"], dict) else None
    return str(wanted) == str(instance_id)


# Vast's documented answer to a retired v0 route (the v0 list: reference/vastai.md §1), as a
# retired single-instance route would give it (peers 2026-12-07 V6/V7: one unverified report).
def deprecated_v0(path: str) -> Reply:
    return error_reply(
        410, "deprecated_endpoint",
        f"{path.rstrip('/')}/ is deprecated. Use /api/v1/instances/ instead.",
    )


class VastOperations:
    """Instances and the operations on them; `FakeVast` sets this state in its constructor."""

    loading_polls: int
    credit: float
    account_keys: list[str]
    ssh_endpoint: tuple[str, int, bool] | None
    node_env_file: Path | None
    ssh_list_shape: str
    user_id: int
    clock: Callable[[], float]
    running_after_s: float | None
    offer_ssh: dict[int, tuple[str, int, bool]]
    on_container_start: ContainerStart | None
    exited_at: dict[int, float]
    _lock: threading.RLock
    _offers: dict[int, dict[str, Any]]
    _instances: dict[int, Instance]
    _next_instance: int
    _stick_loading: set[int]
    _die_on_start: set[int]
    _exit_after: dict[int, int]
    _actor: str
    _linger_after_destroy: int
    # Vast's known trap (vast-cli PR #403): the create's `price` ignored, the instance rented
    # on demand without a word (`is_bid` false).
    silent_on_demand: bool
    # Search columns whose filter the server ignores (a fault: the client checks again).
    unfiltered: set[str]
    # v0 single-instance operations ("show", "destroy", "manage") that answer 410
    # `deprecated_endpoint`, as one report says Vast now does (peers 2026-12-07 V6/V7).
    retired_v0: set[str]

    # -- what the instance's container is given --------------------------------------------

    def instance_env(self, instance_id: int) -> dict[str, str]:
        """What Vast puts into the instance's container for it to act on itself."""
        with self._lock:
            key = self._instances[instance_id].key
        return {"CONTAINER_ID": str(instance_id), "CONTAINER_API_KEY": key}

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

    # -- state machine ----------------------------------------------------------------------

    def _new_instance(self, offer: dict[str, Any], body: dict[str, Any]) -> Instance:
        instance_id = self._next_instance
        self._next_instance += 1
        raw_env = body.get("env")
        env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
        runtype = str(body.get("runtype") or "ssh")
        raw_price = body.get("price")
        price = float(raw_price) if isinstance(raw_price, int | float) else None
        is_bid = price is not None and not self.silent_on_demand
        # The instance bills the disk it was created with (its own dph_total says so).
        raw_disk = body.get("disk")
        disk = float(raw_disk) if isinstance(raw_disk, int | float) else 10.0
        offer = priced(offer, disk)
        # A bid's GPU part is the bid; storage bills besides (dph_total − dph_base).
        storage = max(0.0, float(offer["dph_total"]) - float(offer.get("dph_base") or 0.0))
        gpu_price = price if is_bid else offer.get("dph_base")
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
            "dph_total": round(price + storage, 6) if price is not None and is_bid
            else offer["dph_total"],
            "dph_base": gpu_price,
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
        inst = Instance(row=row, offer_id=int(offer["id"]))
        self._instances[instance_id] = inst
        return inst

    def _advance(self, inst: Instance) -> None:
        """One observation of the instance (a show or a list that includes it)."""
        if not inst.destroyed:
            inst.polls += 1

    def _view(self, inst: Instance, ahead: int = 0) -> dict[str, Any]:
        """The row as the API shows it after `inst.polls + ahead` observations."""
        row = copy.deepcopy(inst.row)
        if row["intended_status"] == "stopped":
            row.update(actual_status="stopped", cur_state="stopped", next_state="stopped")
        elif (
            inst.polls + ahead <= self.loading_polls
            or inst.offer_id in self._stick_loading
            or self._booting(inst)
        ):
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

    def _booting(self, inst: Instance) -> bool:
        after = self.running_after_s
        return after is not None and self.clock() - float(inst.row["start_date"]) < after

    def _exited_late(self, inst: Instance, ahead: int) -> bool:
        limit = self._exit_after.get(inst.offer_id)
        if limit is None or inst.polls + ahead <= self.loading_polls + limit:
            return False
        self.exited_at.setdefault(int(inst.row["id"]), self.clock())
        return True

    def _show_running(self, inst: Instance, row: dict[str, Any]) -> None:
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

    # -- routes -----------------------------------------------------------------------------

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
        bad_json = error_reply(400, "invalid_request", "Invalid json body")

        def guarded(fn: Any, *args: Any) -> Any:
            return (lambda: bad_json) if not body_ok else (lambda: fn(*args))

        if rest[:1] == ["instances"] and len(rest) == 2 and rest[1].isdigit():
            op = {"GET": "show", "PUT": "manage", "DELETE": "destroy"}.get(method)
            if op in self.retired_v0:
                return op, lambda: deprecated_v0(path)
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
            case ("DELETE", ["v1", "instances", iid]) if iid.isdigit():
                # The v1 twin of the v0 destroy, same body and answers. No primary source
                # documents it (the CLI destroys on v0 only); the unverified report of V6/V7
                # says "the /instances family is v1". What a client tries after a v0 410.
                return "destroy", lambda: self._destroy(int(iid))
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

    def _search(self, query: Any) -> Reply:
        return search_offers(self._offers, query, frozenset(self.unfiltered))

    def _create(self, ask_id: int, body: Any) -> Reply:
        if not isinstance(body, dict):
            return ask_invalid_400(ask_id, "body must be a JSON object")
        offer = self._offers.get(ask_id)
        if offer is not None and not offer.get("rentable", True) and body.get("cancel_unavail"):
            # It exists but cannot start now, and the client asked for an error rather than
            # a stopped instance.
            return ask_gone_410(ask_id)
        if offer is None or not offer.get("rentable", True):
            return ask_gone_404(ask_id)
        image = body.get("image")
        if not isinstance(image, str) or not image or len(image) > 1024:
            return ask_invalid_400(ask_id, "'image' is required")
        label = body.get("label")
        if label is not None and (not isinstance(label, str) or len(label) > 256):
            return ask_invalid_400(ask_id, "label must be a string of at most 256 characters")
        start_chars = sum(len(a) for a in body.get("args") or [] if isinstance(a, str))
        start_chars += len(str(body.get("args_str") or "")) + len(str(body.get("onstart") or ""))
        if start_chars > ONSTART_CAP:
            # The cap is documented (reference/vastai.md §3); the exact answer is not: this one
            # is Vast's invalid_args shape.
            return ask_invalid_400(
                ask_id, f"args + args_str + onstart exceed {ONSTART_CAP} characters"
            )
        disk = body.get("disk", 10)
        if not isinstance(disk, int | float) or disk < 8:
            return ask_invalid_400(ask_id, "disk must be a number >= 8")
        if self.credit <= 0:
            return error_reply(400, "insufficient_credit", "Your balance is too low", ask_id=ask_id)
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
            return Reply(
                200,
                {
                    "success": False,
                    "error": "bid_too_low",
                    "msg": "Your bid is below the minimum; the instance was created stopped.",
                    "new_contract": instance_id,
                },
            )
        return Reply(200, {"success": True, "new_contract": instance_id})

    def _show(self, instance_id: int) -> Reply:
        inst = self._instances.get(instance_id)
        if inst is None or (inst.destroyed and inst.lingering <= 0):
            return Reply(200, {"instances": None})
        inst.lingering -= 1 if inst.destroyed else 0
        self._advance(inst)
        return Reply(200, {"instances": self._view(inst)})

    def _deprecated_list(self) -> Reply:
        return error_reply(
            410,
            "deprecated_endpoint",
            "/api/v0/instances/ is deprecated. Use /api/v1/instances/ instead.",
        )

    def _list(self, query: dict[str, str]) -> Reply:
        try:
            filters = json.loads(query.get("select_filters") or "{}")
            order_by = json.loads(query.get("order_by") or "[]")
            limit = int(query.get("limit") or 25)
        except ValueError:
            return error_reply(400, "invalid_request", "Error in query parameters: not valid JSON")
        if not isinstance(filters, dict) or not isinstance(order_by, list):
            return error_reply(400, "invalid_request", "Error in query parameters")
        for column in filters:
            if column in COMPUTED_COLUMNS:
                return error_reply(
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
                return error_reply(400, "invalid_token", "Invalid pagination token")
        live = [i for i in self._instances.values() if not i.destroyed or i.lingering > 0]
        for lingering in (i for i in live if i.destroyed):
            lingering.lingering -= 1
        views = [self._view(i, ahead=1) for i in live]  # as this poll will see them
        matching = [v for v in views if all(matches(v.get(c), ops) for c, ops in filters.items())]
        keys = [
            (str(o.get("col")), str(o.get("dir", "asc")).lower() == "desc")
            for o in order_by
            if isinstance(o, dict) and o.get("col")
        ]
        if not any(c == "id" for c, _ in keys):
            keys.append(("id", False))
        matching = sort_rows(matching, keys)
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
        return Reply(
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

    def _manage(self, instance_id: int, body: Any) -> Reply:
        inst = self._instances.get(instance_id)
        if inst is None or inst.destroyed:
            return error_reply(404, "no_such_instance", f"Instance {instance_id} not found.")
        if not isinstance(body, dict):
            return error_reply(400, "invalid_args", "Invalid args")
        if "label" in body:
            label = body["label"]
            if isinstance(label, str) and len(label) > 1024:
                return error_reply(
                    400,
                    "label_too_long",
                    "Please limit label length to 1024 characters, ideally less than 128.",
                )
            inst.row["label"] = label
            return Reply(200, {"success": True, "msg": f"label for {instance_id} set to '{label}'"})
        if body.get("state") in ("running", "stopped"):
            state = body["state"]
            inst.row.update(intended_status=state, cur_state=state, next_state=state)
            return Reply(200, {"success": True})
        return error_reply(400, "invalid_args", "Invalid args: nothing to change")

    def _destroy(self, instance_id: int) -> Reply:
        inst = self._instances.get(instance_id)
        if inst is None or inst.destroyed:
            return error_reply(404, "no_such_instance", f"Instance {instance_id} not found.")
        inst.destroyed = True
        inst.destroyed_by = self._actor
        inst.lingering = self._linger_after_destroy
        return Reply(200, {"success": True, "msg": f"destroying instance {instance_id}."})

    def _destroy_bulk(self, body: Any) -> Reply:
        ids = body.get("instance_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list):
            return error_reply(400, "invalid_args", "instance_ids is required")
        for iid in ids:
            inst = self._instances.get(int(iid))
            if inst is not None:
                inst.destroyed_by = inst.destroyed_by or self._actor
                inst.destroyed = True
        return Reply(200, {"success": True})

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

    def _ssh_list(self) -> Reply:
        rows = self._key_rows()
        if self.ssh_list_shape == "wrapped":
            return Reply(
                200, {"ssh_keys": [{"id": r["id"], "ssh_key": r["public_key"]} for r in rows]}
            )
        return Reply(200, rows)

    def _ssh_create(self, body: Any) -> Reply:
        text = body.get("ssh_key") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return error_reply(400, "no_ssh_key", "No ssh key provided")
        self.account_keys.append(text.replace("\x00", ""))
        return Reply(200, {"success": True, "key": self._key_rows()[-1]})

    def _user(self) -> Reply:
        return Reply(
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

    def _gpu_names(self) -> Reply:
        names = sorted({str(o["gpu_name"]) for o in self._offers.values()} | {"RTX 4090"})
        return Reply(200, {"gpu_names": names})

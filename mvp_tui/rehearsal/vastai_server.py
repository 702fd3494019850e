"""`FakeVast`: a stateful Vast.ai API on loopback, for tests and the official CLI alike.

A real HTTP server (stdlib `ThreadingHTTPServer` on 127.0.0.1:0, in a daemon thread), so it
serves async tests, sync tests and subprocess clients such as the `vastai` CLI. It answers
with the real paths, status codes and bodies of /work/shared/reference/vastai.md, always
with `Content-Type: application/json` exactly (the CLI compares it by string equality).

State: offers (an offer can be rented once), instances that move `loading → running` after
`loading_polls` observations (show or list: deterministic, no wall clock), account SSH keys
and credit. Faults are scripted per operation (`script`, `rate_limit`, `fail_destroy`, …;
`retired_v0`: the v0 single-instance routes answer 410 `deprecated_endpoint`);
the operation names are "search", "create", "show", "list", "destroy", "ssh_list",
"ssh_create", "user", plus "manage" (PUT /instances/{id}/) and "gpu_names".

Instance-scoped keys (Vast's CONTAINER_API_KEY): every instance gets its own random key
(`instance_env`, `write_instance_env` give it to the "node"); it is accepted only on that
instance's own show, start/stop (`PUT {"state": …}`) and destroy. Any other use answers 401
and lands in `scope_violations`.
`destroyed_by` tells whether the account key or the instance's own key destroyed it.
`onstart_of` and `container_env` give a test what the instance's container starts with (its
recorded onstart and env), so the real start script runs as Vast would run it; a create whose
`args` + `args_str` + `onstart` exceed Vast's 4096 characters is refused (400 invalid_args).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mvp_tui.rehearsal.http_fake import JSON, ApiHandler, Reply
from mvp_tui.rehearsal.vast_offers import default_offer
from mvp_tui.rehearsal.vast_operations import (
    ONSTART_CAP,
    PAGE_MAX,
    ContainerStart,
    Instance,
    VastOperations,
    in_scope,
)
from mvp_tui.rehearsal.vast_replies import (
    Fault,
    RecordedRequest,
    error_reply,
    fault_reply,
    rate_limit_reply,
)

# The names tests and benches import from here (the fake's one public module).
_default_offer = default_offer
__all__ = [
    "JSON",
    "ONSTART_CAP",
    "PAGE_MAX",
    "FakeVast",
    "Fault",
    "RecordedRequest",
    "_default_offer",
]


class FakeVast(VastOperations):
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
        # Seconds from a create until its instance runs, on the wall clock, over
        # `loading_polls` (the bring-up bench's boot: the image pull); None: polls only.
        self.running_after_s: float | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._offers: dict[int, dict[str, Any]] = {}
        self._instances: dict[int, Instance] = {}
        self._next_offer = 1001
        self._next_instance = 7001
        self._faults: dict[str, deque[Fault]] = {}
        self._rate_limited: dict[str, int] = {}
        self._destroy_failures: list[list[Any]] = []  # [instance_id | None, times, status]
        self._stick_loading: set[int] = set()
        self._die_on_start: set[int] = set()
        self._cut_off: set[int] = set()  # offers whose instances cannot reach this API
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
        self.silent_on_demand = False  # creates ignore `price` (rent on demand, say nothing)
        # Search filters the server ignores, by column (e.g. {"cuda_max_good"}): offers the
        # query excludes come back anyway, for the client's own check to catch.
        self.unfiltered: set[str] = set()
        # v0 single-instance operations answering 410 deprecated_endpoint: "show" (GET),
        # "destroy" (DELETE), "manage" (PUT) on /api/v0/instances/{id}/; the v1 list (and a
        # DELETE /api/v1/instances/{id}/) keep answering.
        self.retired_v0: set[str] = set()
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
            row = default_offer(offer_id)
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

    def cut_off_from_api(self, offer_id: int) -> None:
        """Instances created from this offer cannot reach the API (a host without outbound
        HTTPS): every request carrying their own key is dropped without an answer."""
        with self._lock:
            self._cut_off.add(offer_id)

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

    def outbid(self, instance_id: int) -> None:
        """A higher bid took the GPU: Vast pauses the interruptible instance (stopped, meant to
        stay stopped: `cur_state == intended_status == next_state == "stopped"`); it still
        bills storage until destroyed."""
        with self._lock:
            self._instances[instance_id].row.update(
                intended_status="stopped", cur_state="stopped", next_state="stopped",
                status_msg="Instance outbid and paused")

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

    def stop_instance(self, instance_id: int) -> None:
        """The instance is stopped, as `PUT /instances/{id}/ {"state": "stopped"}` leaves
        it (reference §4, §5): the container stops; it still bills its storage."""
        with self._lock:
            row = self._instances[instance_id].row
            row.update(intended_status="stopped", cur_state="stopped", next_state="stopped")

    def outbid_instance(self, instance_id: int) -> None:
        """The instance is an interruptible bid that lost to a higher one: Vast pauses it
        (`intended_status`, `cur_state`, `next_state` all "stopped", dstack's test for an
        outbid instance; reference §4); it still bills its storage."""
        with self._lock:
            row = self._instances[instance_id].row
            row.update(is_bid=True, intended_status="stopped", cur_state="stopped",
                       next_state="stopped")

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

    def offers(self) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(o) for o in self._offers.values()]

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
        with self._lock:
            cut_off = owner is not None and self._instances[owner].offer_id in self._cut_off
        if cut_off:
            handler.drop()  # its host's network never got the request here
            return
        if owner is not None and not in_scope(owner, op, path, body, query):
            with self._lock:
                self.scope_violations.append(
                    RecordedRequest(method, parts.path, query, headers, body)
                )
            handler.reply(error_reply(401, "auth_error", "Invalid user key"))
            return
        if op is None:
            handler.reply(
                error_reply(404, "not_found", f"{method} {parts.path} is not an API path")
            )
            return
        if owner is None and not self._authorised(op, headers, query):
            handler.reply(error_reply(self.auth_error_status, "auth_error", "Invalid user key"))
            return
        if owner is not None:
            perform = self._acting_as("instance", perform)
        with self._lock:
            limited = self._rate_limited.get(op, 0)
            if limited:
                self._rate_limited[op] = limited - 1
            fault = None if limited else self._next_fault(op, method, path)
        if limited:
            handler.reply(rate_limit_reply(op))
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
        handler.reply(self._perform(perform) if fault.late else fault_reply(op, fault, path))

    def _perform(self, operation: Any) -> Reply:
        """Run one operation under the lock; a bug in the fake answers 500, not a hang."""
        with self._lock:
            try:
                reply: Reply = operation()
            except Exception as exc:  # the fake must answer whatever happens
                reply = error_reply(500, "server_error", f"fake Vast bug: {exc!r}")
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

        def run() -> Reply:
            self._actor = actor
            try:
                reply: Reply = operation()
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

    # -- faults -----------------------------------------------------------------------------

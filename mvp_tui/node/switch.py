"""The dead-man's switch (deadline, silence, idle stop) and the boot guard's report."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mvp_tui.node.control import Control, Interrupted, ms_since
from mvp_tui.node.frames import Emitter, clean_text
from mvp_tui.node.instance_api import (
    IDLE_STOP_WARN_S,
    REQUIRE_HINT,
    VERDICT_ATTEMPTS,
    WATCHDOG_RETRY_CAP_S,
    WATCHDOG_WAIT_CAP_S,
    Credentials,
    InstanceApi,
    SwitchSettings,
    instance_api,
    node_api,
    resolve_credentials,
)
from mvp_tui.node_protocol import (
    BOOT_GUARD_DIR,
    BOOT_GUARD_PHASE,
    BOOT_GUARD_STAND_DOWN_FILE,
    BOOT_GUARD_VERDICT_FILE,
    WATCHDOG_PHASE,
    SwitchEnv,
)
from mvp_tui.secrets import Redactor

# ---------------------------------------------------------------------------------------
# The boot guard: armed by the instance's start command, stood down here

BOOT_GUARD_VERDICT_WAIT_S = 5.0  # the guard writes its verdict first thing; a race waits this
BOOT_GUARD_LINE_MAX = 300
# Refused destroys (401/403) before the switch tries the other ways once and gives up: one
# refusal may be a key not yet live; three say the key lacks the right.
DESTROY_REFUSALS = 3


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
    declared = node_api(provider)
    if declared is not None and not declared.bills:
        why = "a local or Docker node does not bill: no boot guard runs"
        return "ready", {"state": "not_needed", "armed": False, "reason": why}
    directory = Path(env.get(SwitchEnv.env_name("boot_guard_dir"), "").strip() or BOOT_GUARD_DIR)
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
        settings: SwitchSettings,
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
        declared = self.settings.node_api
        return declared is not None and declared.bills

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
                              idle_stop_mins=self.settings.idle_stop_mins)

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
                                  idle_stop_mins=self.settings.idle_stop_mins)

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
                self.emitter.phase(WATCHDOG_PHASE, "failed", failed, ms_since(started))
                raise
        base = self._detail()
        if reason is not None:
            self.verdict = "failed"
            # Whose failure: "host" only where another host could do better (its network);
            # a key without the right, or a missing one, fails the same on every host.
            scope = "host" if detail.get("scope") == "host" else "run"
            reason = clean_text(reason, 600, redact=self.emitter.redact)
            base.update(reason=reason, armed=False, scope=scope)
            self.emitter.phase(WATCHDOG_PHASE, "failed", base, ms_since(started))
            self.emitter.stderr(f"mvp-node: dead-man's switch verdict failed: {reason}")
            return
        self.verdict = "ready"
        base.update(detail)
        base["armed"] = (
            self.deadline_at is not None or self._silence_armed or self.idle_stop_s is not None
        )
        base["action"] = "destroy" if self.uses_api else "end"
        self.emitter.phase(WATCHDOG_PHASE, "ready", base, ms_since(started))

    def report_boot_guard(self) -> None:
        """The boot guard's verdict, as its own phase, first thing: once the agent runs, the
        guard stands down (this node has an agent; the switch takes over)."""
        if self.settings.node_api is None:
            return  # an unknown provider: the switch's verdict says so
        started = time.monotonic()
        status, detail = boot_guard_report(self.env, self.provider)
        if "reason" in detail:
            detail["reason"] = clean_text(detail["reason"], 600, redact=self.emitter.redact)
        self.emitter.phase(BOOT_GUARD_PHASE, status, detail, ms_since(started))
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
        declared = self.settings.node_api.instance_api if self.settings.node_api else None
        if declared is None:
            return None, f"provider {self.provider} has no API for its instance"
        creds, why = resolve_credentials(declared, self.provider, self.env,
                                         self.settings.env_file)
        if creds is not None:
            self.redactor.add(creds.key)  # before anything could print it
            self._creds = creds
        return creds, why

    def _prove(self) -> tuple[str | None, dict[str, Any]]:
        """(None, detail) when a harmless authenticated read of our own instance worked,
        else (reason, {}), or (reason, {"scope": "host"}) when this host cannot reach the API."""
        if self.settings.url_problem:
            return self.settings.url_problem, {}
        creds, why = self._credentials()
        if creds is None:
            return why, {}
        api = instance_api(self.settings, creds)
        doing = f"reading {api.name} instance {creds.instance_id} at {self.settings.api_url}"
        delay = self.settings.retry_initial_s
        answer = api.read()
        tries = 1
        while answer.transient and tries < VERDICT_ATTEMPTS:
            # No engine runs yet during the verdict: dropping inbox events loses nothing.
            self.control.pause(max(min(delay, WATCHDOG_RETRY_CAP_S), api.retry_floor(answer)))
            delay *= 2
            answer = api.read()
            tries += 1
        if api.shows_self(answer):
            return self._prove_write(api, creds, doing)
        if api.refused(answer):
            return api.refusal_text(answer, doing), {}
        if answer.transient:
            return (
                f"cannot reach the {api.name} API to prove the switch ({answer.describe()} "
                f"after {tries} tries, {doing}): the node needs outbound HTTPS to it; "
                f"{REQUIRE_HINT}"
            ), {"scope": "host"}
        if api.is_gone(answer) or answer.status == 200:
            return (
                f"{api.name} does not show instance {creds.instance_id} to its own key "
                f"({answer.describe()}): the instance id in the node environment is not "
                f"this machine's; {REQUIRE_HINT}"
            ), {}
        return f"unexpected answer {doing}: {answer.describe()}; {REQUIRE_HINT}", {}

    def _last_resorts(self, api: InstanceApi, what: str, refused: str) -> str | None:
        """The provider's other documented ways to end `what`, each once; None when one
        ended it, else why the instance may still bill."""
        tried = []
        for word, call in api.fallback_calls():
            answer = call()
            self.emitter.notice(
                f"dead-man's switch: {word} of {what} after its refused destroy: "
                f"{clean_text(answer.describe(), 200, redact=self.emitter.redact)}"
            )
            tried.append(f"{word}: {answer.describe()}")
            ended = api.delete_accepted(answer) or api.is_gone(answer)
            if word == "stop" and answer.status == 200:
                tried[-1] = "stop: accepted (its GPU stops billing, its disk does not)"
            elif ended and api.is_gone(api.read()):
                return None
        also = f"; also tried {', '.join(tried)}" if tried else ""
        return (
            f"{refused}{also}; {what} may still bill until it is destroyed from the dashboard "
            "(mvp-tui down --all) or the provider's console"
        )

    def _prove_write(
        self, api: InstanceApi, creds: Credentials, doing: str
    ) -> tuple[str | None, dict[str, Any]]:
        """After the read: the provider's documented no-op write, where it has one (Vast);
        without one (RunPod) the delete right is unproven and the verdict says so — RunPod
        pod keys have been seen refused with HTTP 403 on their own delete."""
        detail: dict[str, Any] = {"credentials": creds.source, "api_url": api.base_url}
        answer = api.write_probe()
        if answer is None:
            detail.update(proof="read", destroy_proven=False)
            return None, detail
        if answer.status == 200 and answer.field("success") is not False:
            detail.update(proof="write", destroy_proven=True)
            return None, detail
        if api.refused(answer):
            return (
                f"{api.name} let the instance key read its instance but refused a no-op change "
                f"of it ({answer.describe()}): this node could not destroy itself; "
                f"{REQUIRE_HINT}"
            ), {}
        # A transient or odd answer to the write: the read proved the key; say what we saw.
        detail.update(proof="read", destroy_proven=False,
                      write_probe=clean_text(answer.describe(), 200))
        return None, detail

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
                              stops_in_s=round(left, 3))
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
        """Destroy our own instance until the provider confirms it is gone (given up only
        when its key is refused), or on a local/docker node just record the end."""
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        started = time.monotonic()
        if not self.uses_api:
            detail = self._detail()
            detail.update(trigger=trigger, destroyed=False, ended=True)
            self.emitter.phase(WATCHDOG_PHASE, "ready", detail, ms_since(started))
            return
        attempts, refused = self._destroy_until_gone()
        detail = self._detail()
        if refused is not None:  # the key lacks the right: retrying cannot help
            detail.update(trigger=trigger, destroyed=False, attempts=attempts, bills=True,
                          reason=clean_text(refused, 600, redact=self.emitter.redact))
            self.emitter.phase(WATCHDOG_PHASE, "failed", detail, ms_since(started))
            self.emitter.stderr(f"mvp-node: dead-man's switch gave up: {detail['reason']}")
            return
        detail.update(trigger=trigger, destroyed=True, attempts=attempts)
        self.emitter.phase(WATCHDOG_PHASE, "ready", detail, ms_since(started))

    def _destroy_until_gone(self) -> tuple[int, str | None]:
        """(attempts, None) once the provider confirms the instance gone; retried while
        there is a chance (network, rate limits, a destroy that lingers). A refused key
        gets the provider's other documented ways once each, then (attempts, why): a pod
        that refuses its own key would otherwise be retried, billing, for ever."""
        if self.settings.url_problem:  # the key goes to no URL the node itself refuses
            return 0, self.settings.url_problem
        delay = self.settings.retry_initial_s
        attempt = refusals = 0
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
                        return attempt, None
                    floor = api.retry_floor(check)
                    problem = f"{what} still shows after its destroy ({check.describe()})"
                elif api.refused(answer):
                    problem = api.refusal_text(answer, f"destroying {what}")
                    refusals += 1
                    if refusals >= DESTROY_REFUSALS:
                        return attempt, self._last_resorts(api, what, problem)
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



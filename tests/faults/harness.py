"""What every fault-matrix case shares: the environment of a run against the fake Vast
server (and, for bring-up cases, a real sshd node), the CLI, the run as a child process, and
the four checks each case ends with.

The four checks (issue 8, "A fault matrix, as a test suite"):

1. the fake ends with zero instances alive — or, for an unconfirmed teardown, the command
   exits 3, stderr names the lease and the run record on disk still holds it as open;
2. the records on disk match the fake: every lease a record calls open exists there, and
   every instance there is open in a record;
3. no Python traceback on stderr;
4. the exit code the docs document for the case (docs/spend-safety.md, "Every way out").
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.lease.records import RecordStore
from tests.e2e.headless import HeadlessRun, Record
from tests.fakes.vastai_server import FakeVast

KEY = "fake-vast-key-0123456789"
TRACEBACK = "Traceback (most recent call last)"

# Short waits everywhere: the fake answers at once, the node is this machine.
FAST = {
    "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
    "MVP_LEASE_RECONCILE_WAITS_SECS": "0.05,0.1",
    "MVP_LEASE_DELETE_TIMEOUT_SECS": "20",
    "MVP_LEASE_DESTROY_BACKOFF_SECS": "0.05",  # six refusals in 1.6 s, not 31 s
    "MVP_MAX_PRICE_PER_HOUR": "1.0",
    "MVP_SSH_RETRY_INITIAL_SECS": "0.2",
    "MVP_SSH_RETRY_MAX_SECS": "1",
    "MVP_SSH_CONNECT_TIMEOUT_SECS": "3",
    "MVP_SSH_READY_TIMEOUT_SECS": "60",
    "MVP_PROMPT_OPENAI_PORT": "0",  # side by side: a free port, not the fixed default
}


def vast_env(fake: FakeVast, identity: Path, state: Path) -> dict[str, str]:
    """A run that rents on the fake Vast server (the API URL by its documented env name)."""
    return {
        **isolated(state),
        "MVP_NODE_PROVIDER": "vastai",
        "VASTAI_API_KEY": KEY,
        "MVP_VASTAI_API_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(identity),
        "MVP_STATE_DIR": str(state),
        **FAST,
    }


def isolated(state: Path) -> dict[str, str]:
    """No user config file is read (a key in ~/.config must not leak into a case)."""
    return {"XDG_CONFIG_HOME": str(state.parent / "xdg-config"), "MVP_STATE_DIR": str(state)}


def cli(*args: str, env: dict[str, str], timeout: float = 100) -> subprocess.CompletedProcess[str]:
    """`mvp-tui ARGS` with only `env` among the MVP_*/VAST* variables."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    return subprocess.run([sys.executable, "-m", "mvp_tui", *args], capture_output=True,
                          text=True, env={**base, **env}, timeout=timeout)


async def acli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(cli, *args, env=env)


# A file may not grow past this: enough for the few bytes that imports write (tempfile
# probes its directory), far too little for a run record.
FULL_DISK_BYTES = 256


def _no_bigger_files() -> None:
    """In the child before exec: a write that grows a regular file past FULL_DISK_BYTES fails
    with EFBIG, like a full disk (as root too; pipes are not files, so stdout/stderr still
    work). CPython ignores SIGXFSZ, so the write raises OSError instead of killing it."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (FULL_DISK_BYTES, FULL_DISK_BYTES))


class Run(HeadlessRun):
    """`mvp-tui up --headless` as a child; optionally with file writes failing (disk full)."""

    def __init__(
        self,
        args: list[str],
        state_dir: Path,
        env: dict[str, str],
        *,
        disk_full: bool = False,
        wrapper: tuple[str, ...] = (),
    ) -> None:
        super().__init__(args, state_dir, env)
        self.disk_full = disk_full
        self.wrapper = wrapper  # a command that ends by exec'ing its arguments (a namespace)

    async def __aenter__(self) -> Run:
        self.proc = await asyncio.create_subprocess_exec(
            *self.wrapper, sys.executable, "-m", "mvp_tui", "up", "--headless", *self.args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env,
            preexec_fn=_no_bigger_files if self.disk_full else None,
        )
        return self

    async def ended(self, within: float, after: str) -> int:
        """Read to the end; the exit code. A run still alive after `within` seconds fails
        the case (and is killed, so the test ends), saying what it was waiting for and the
        last events it printed."""
        assert self.proc is not None and self.proc.stdout is not None
        assert self.proc.stderr is not None
        stdout, stderr = self.proc.stdout, self.proc.stderr

        async def lines() -> None:
            while line := await stdout.readline():
                if line.strip():
                    self.records.append(json.loads(line))

        try:
            async with asyncio.timeout(within):
                _, err = await asyncio.gather(lines(), stderr.read())
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            names = [_brief(r) for r in self.records if r.get("event") != "frame"]
            pytest.fail(
                f"mvp-tui up did not exit within {within:g} s after {after}; "
                f"its last events: {names[-8:]}",
                pytrace=False,
            )
        self.stderr = err.decode(errors="replace")
        assert self.proc.returncode is not None
        return self.proc.returncode

    @property
    def run_id(self) -> str:
        started = self.events("run_started")
        assert started, "no run_started record"
        return str(started[0]["run_id"])

    async def kill9(self) -> None:
        """SIGKILL, as a crash or `kill -9`: nothing of the process runs after it."""
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        await self.proc.wait()


def _brief(record: Record) -> str:
    """An event's name with what says how it went (outcome, reason, state), if any."""
    how = [str(record[k]) for k in ("outcome", "reason", "state") if record.get(k)]
    return f"{record.get('event')}({', '.join(how)})" if how else str(record.get("event"))


async def until_true(what: str, check: Callable[[], bool], within: float = 30.0) -> None:
    """Poll `check` (fake or process state) until it holds; fail after `within` seconds."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {within:g} s waiting for {what}", pytrace=False)
        await asyncio.sleep(0.02)


def is_event(name: str, **fields: Any) -> Callable[[Record], bool]:
    return lambda r: r.get("event") == name and all(r.get(k) == v for k, v in fields.items())


# ---- the four checks -----------------------------------------------------------------------


@dataclass
class OpenLease:
    run_id: str
    provider: str
    provider_id: str | None
    state: str


@dataclass
class Verdict:
    """The facts one case ends with; also put into the report for the results table."""

    record_property: Callable[[str, object], None]
    facts: dict[str, object] = field(default_factory=dict)

    def note(self, name: str, value: object) -> None:
        self.facts[name] = value
        self.record_property(name, value)

    def exit_code(
        self, code: int | None, stderr: str, *, expected: int | tuple[int, ...], what: str
    ) -> None:
        """Checks 3 and 4 for one command; a case's commands show as "3,0" in the table."""
        before = self.facts.get("exit_code")
        self.note("exit_code", code if before is None else f"{before},{code}")
        assert TRACEBACK not in stderr, f"{what}: a traceback on stderr:\n{stderr[-3000:]}"
        allowed = expected if isinstance(expected, tuple) else (expected,)
        assert code in allowed, (
            f"{what}: exit {code}{_signal_name(code)}, expected {expected}; "
            f"stderr: {stderr[-1500:]!r}"
        )

    def nothing_bills(self, fake: FakeVast, state: Path) -> None:
        """Checks 1 and 2 for a case that ends with everything torn down."""
        left = fake.billing()
        self.note("instances_left", len(left))
        assert left == [], f"instances still billing: {[i['id'] for i in left]}"
        records_match(fake, state)

    def left_billing(self, fake: FakeVast, state: Path, count: int) -> None:
        """A case that deliberately leaves `count` leases running, recorded."""
        left = fake.billing()
        self.note("instances_left", len(left))
        assert len(left) == count, f"expected {count} instance(s) alive, found {left}"
        records_match(fake, state)


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        return f" (killed by {signal.Signals(-code).name})"
    return ""


def open_leases(state: Path) -> list[OpenLease]:
    """Every lease the records on disk call open (not confirmed deleted)."""
    scan = RecordStore(state).scan()
    assert not scan.errors, f"unreadable run records: {[str(e) for e in scan.errors]}"
    return [
        OpenLease(run.run_id, lease.provider, lease.provider_id, lease.state.value)
        for run in scan.runs
        for lease in run.open_leases()
    ]


def records_match(fake: FakeVast, state: Path) -> None:
    """Check 2: open leases on disk == instances alive at the provider."""
    recorded = open_leases(state)
    alive = {str(i["id"]) for i in fake.instances()}
    ids = {lease.provider_id for lease in recorded}
    assert None not in ids, f"an open lease without a provider id stays on record: {recorded}"
    assert ids == alive, (
        f"records and provider disagree: open on record {sorted(map(str, ids))}, "
        f"alive at the provider {sorted(alive)}"
    )


def unconfirmed(stderr: str, state: Path, provider_id: str, run_id: str) -> None:
    """Check 1 for a teardown that was not confirmed: the lease is named on stderr (one
    line with its provider id, the run id and `mvp-tui down`) and still open on record."""
    lines = [ln for ln in stderr.splitlines() if provider_id in ln]
    assert lines, f"stderr does not name lease {provider_id}: {stderr!r}"
    assert any(run_id in ln and "mvp-tui down" in ln for ln in lines), (
        f"no stderr line names lease {provider_id} with run {run_id} and `mvp-tui down`: {lines}"
    )
    still = [x for x in open_leases(state) if x.provider_id == provider_id]
    assert still, f"lease {provider_id} is not open on record any more"

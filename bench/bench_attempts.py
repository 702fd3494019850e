"""The walk's own cost per failed host: what mvp-tui adds when a host fails after "running".

Five offers on a zero-latency FakeVast; every instance runs, then shows "exited" at its
first poll during bring-up (its SSH endpoint never answers). Each attempt: create, settle,
bring-up with the provider watched, the failure noticed, the session closed, the instance
destroyed (confirmed), the attempt journaled, the next offer leased; after five the run
stops ([lease] max_attempts).

Printed per failed attempt, nothing subtracted from anything:
- the walk's own CPU: CPU time of the event-loop thread, where all of mvp-tui's work runs
  (records, journal, events, classification, the httpx client and its JSON, SSH session
  set-up and close); the fake's server threads are not in it, nor the wait on disk, nor
  asyncio's address lookups, which run in its default executor's threads;
- durable writes: how many fsyncs and the wall time spent in them (disk latency, which is
  the machine's: tmpfs, a quiet SSD and a contended disk differ by 10x);
- wall time, and the part of it spent in the scripted waits (poll interval, delete polls)
  and in awaiting provider calls; these overlap mvp-tui's own work (the SSH set-up runs
  while the watch sleeps), so they are shown, not subtracted.
The state dir is made beside the user's real state dir (same filesystem as a real run), not
in /tmp. Target: < 100 ms of own CPU per failed attempt.

Run: .venv/bin/python bench/bench_attempts.py [--runs 5] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import asyncssh  # noqa: E402

from bench.smoke import add_smoke, load_note, verdict  # noqa: E402
from bench.timed_provider import TimedProvider  # noqa: E402
from mvp_tui.config import ConfigPaths, load_config  # noqa: E402
from mvp_tui.engine.controller import Plan, RunAborted, RunController  # noqa: E402
from mvp_tui.engine.events import AttemptAbandoned  # noqa: E402
from mvp_tui.engine.run import RunEngine  # noqa: E402
from mvp_tui.events import RecordingSink  # noqa: E402
from mvp_tui.lease.settings import WalkSettings  # noqa: E402
from mvp_tui.providers.vastai.client import VastAiProvider  # noqa: E402
from tests.fakes.vastai_server import FakeVast  # noqa: E402
from tests.ssh.sshd import free_port  # noqa: E402

OFFERS = 5
POLL_S = 0.05


TARGET_MS = 100.0


class FsyncMeter:
    """Counts every `os.fsync` the walk makes and the wall time spent in them."""

    def __init__(self) -> None:
        self.count = 0
        self.spent_s = 0.0

    @contextmanager
    def watching(self) -> Iterator[None]:
        real = os.fsync

        def counted(fd: int) -> None:
            started = time.perf_counter()
            try:
                real(fd)
            finally:
                self.spent_s += time.perf_counter() - started
                self.count += 1

        os.fsync = counted  # every module calls it as os.fsync
        try:
            yield
        finally:
            os.fsync = real


@dataclass
class Walk:
    wall_s: float
    cpu_s: float  # the event-loop thread's
    provider_s: float
    waits_s: float
    fsyncs: int
    fsync_s: float
    failed: int


class TimedSleep:
    def __init__(self) -> None:
        self.spent_s = 0.0

    async def __call__(self, seconds: float) -> None:
        started = time.perf_counter()
        try:
            await asyncio.sleep(seconds)
        finally:
            self.spent_s += time.perf_counter() - started


async def one_run(tmp: Path, offers: int) -> Walk:
    key = tmp / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    key.chmod(0o600)
    with FakeVast(loading_polls=0) as fake:
        fake.ssh_endpoint = ("127.0.0.1", free_port(), True)  # nothing listens there
        for n in range(offers):
            fake.exit_after_running(fake.add_offer(dph_total=0.30 + n / 100), 1)
        env = {"MVP_PROVIDER": "vastai", "VASTAI_API_KEY": fake.api_key, "VAST_URL": fake.url,
               "MVP_STATE_DIR": str(tmp / "state"), "MVP_VASTAI_SSH_IDENTITY": str(key),
               "MVP_LIMITS_REQUIRE_NODE_WATCHDOG": "false", "MVP_LEASE_MAX_ATTEMPTS": str(offers),
               "MVP_LEASE_SAME_FAILURE_LIMIT": "10"}
        config = load_config(env=env, paths=ConfigPaths(default=tmp / "none.toml"))
        sleep, sink = TimedSleep(), RecordingSink()
        inner = VastAiProvider(api_key=fake.api_key, api_url=fake.url)
        provider = TimedProvider(inner)

        def fast(walk: WalkSettings) -> WalkSettings:
            return dataclasses.replace(
                walk, poll_interval_s=POLL_S, delete_poll_s=POLL_S, sleep=sleep
            )

        engine = RunEngine(config, sink, provider=provider, settings_override=fast)  # type: ignore[arg-type]
        controller = RunController(engine)
        found = await engine.search_offers()
        meter = FsyncMeter()
        with meter.watching():
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                await controller.lease_and_serve(found, Plan(until="ready"))
            except RunAborted as aborted:
                if not aborted.result.nothing_bills:
                    raise SystemExit(f"a failed host may still bill: {aborted.reason}") from None
            else:
                raise SystemExit("the bench run served: every host was meant to fail")
            wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
        await engine.aclose()
        failed = sum(1 for e in sink.events if isinstance(e, AttemptAbandoned))
        if fake.billing():
            raise SystemExit("instances left billing on the fake")
        return Walk(wall, cpu, provider.spent_s, sleep.spent_s, meter.count, meter.spent_s,
                    failed)


def state_parent() -> Path:
    """Beside the user's real state dir: the filesystem a real run's records land on."""
    import platformdirs

    parent = platformdirs.user_state_path("mvp-tui").parent
    parent.mkdir(parents=True, exist_ok=True)
    return parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    add_smoke(parser)
    args = parser.parse_args()
    offers = 2 if args.smoke else OFFERS
    runs = 1 if args.smoke else args.runs
    walks: list[Walk] = []
    for n in range(runs + 1):
        with tempfile.TemporaryDirectory(prefix="mvp-bench-attempts-", dir=state_parent()) as tmp:
            walk = asyncio.run(one_run(Path(tmp), offers))
        if n:  # the first is a warm-up: imports, first connection
            walks.append(walk)

    def per(value: float, walk: Walk) -> float:
        return value / max(1, walk.failed)

    def median(pick: Callable[[Walk], float]) -> float:
        return statistics.median(pick(w) for w in walks)

    cpu_ms = [per(w.cpu_s, w) * 1000 for w in walks]
    print(f"walk across hosts: {offers} offers, each host fails after running "
          f"({walks[-1].failed} failed attempts per run), {runs} runs, state in "
          f"{state_parent()} ({load_note()})")
    print(f"per failed attempt (medians; max of the walk's CPU {max(cpu_ms):.1f} ms):")
    print(f"  the walk's own CPU (event-loop thread)   {statistics.median(cpu_ms):7.1f} ms   "
          f"target < {TARGET_MS:g} ms {verdict(max(cpu_ms) < TARGET_MS, args.smoke)}")
    print(f"  durable writes                           "
          f"{median(lambda w: per(w.fsyncs, w)):7.1f} fsyncs, "
          f"{median(lambda w: per(w.fsync_s, w)) * 1000:.1f} ms in them "
          f"({median(lambda w: w.fsync_s / max(1, w.fsyncs)) * 1000:.2f} ms each)")
    print(f"  wall                                     "
          f"{median(lambda w: per(w.wall_s, w)) * 1000:7.1f} ms, of which scripted waits "
          f"{median(lambda w: per(w.waits_s, w)) * 1000:.1f} ms and awaiting the provider "
          f"{median(lambda w: per(w.provider_s, w)) * 1000:.1f} ms (overlapping our own work: "
          "not subtracted)")


if __name__ == "__main__":
    main()

"""The walk's own cost per failed host: what mvp-tui adds when a host fails after "running".

Five offers on a zero-latency FakeVast; every instance runs, then shows "exited" at its
first poll during bring-up (its SSH endpoint never answers). Each attempt: create, settle,
bring-up with the provider watched, the failure noticed, the session closed, the instance
destroyed (confirmed), the attempt journaled, the next offer leased; after five the run
stops ([lease] max_attempts). Provider calls are timed through a thin proxy and every
scripted wait (poll interval, delete polls) through a timed sleep; what is left is the
walk's own work (records and journal fsynced, events, classification, SSH session set-up
and close). Target: < 100 ms per failed attempt.

Run: .venv/bin/python bench/bench_attempts.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import asyncssh  # noqa: E402

from bench.timed_provider import TimedProvider  # noqa: E402
from mvp_tui.config import ConfigPaths, load_config  # noqa: E402
from mvp_tui.engine.controller import Plan, RunAborted, RunController  # noqa: E402
from mvp_tui.engine.events import AttemptAbandoned  # noqa: E402
from mvp_tui.engine.run import RunEngine  # noqa: E402
from mvp_tui.events import RecordingSink  # noqa: E402
from mvp_tui.lease.settings import WalkSettings  # noqa: E402
from mvp_tui.providers.vastai import VastAiProvider  # noqa: E402
from tests.fakes.vastai_server import FakeVast  # noqa: E402
from tests.ssh.sshd import free_port  # noqa: E402

OFFERS = 5
POLL_S = 0.05


class TimedSleep:
    def __init__(self) -> None:
        self.spent_s = 0.0

    async def __call__(self, seconds: float) -> None:
        started = time.perf_counter()
        try:
            await asyncio.sleep(seconds)
        finally:
            self.spent_s += time.perf_counter() - started


async def one_run(tmp: Path) -> tuple[float, float, float, int]:
    """(wall s, provider s, scripted waits s, failed attempts) of one run."""
    key = tmp / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    key.chmod(0o600)
    with FakeVast(loading_polls=0) as fake:
        fake.ssh_endpoint = ("127.0.0.1", free_port(), True)  # nothing listens there
        for n in range(OFFERS):
            fake.exit_after_running(fake.add_offer(dph_total=0.30 + n / 100), 1)
        env = {"MVP_PROVIDER": "vastai", "VASTAI_API_KEY": fake.api_key, "VAST_URL": fake.url,
               "MVP_STATE_DIR": str(tmp / "state"), "MVP_VASTAI_SSH_IDENTITY": str(key),
               "MVP_LIMITS_REQUIRE_NODE_WATCHDOG": "false", "MVP_LEASE_MAX_ATTEMPTS": "5",
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
        offers = await engine.search_offers()
        started = time.perf_counter()
        try:
            await controller.lease_and_serve(offers, Plan(until="ready"))
        except RunAborted as aborted:
            if not aborted.result.nothing_bills:
                raise SystemExit(f"a failed host may still bill: {aborted.reason}") from None
        else:
            raise SystemExit("the bench run served: every host was meant to fail")
        wall = time.perf_counter() - started
        await engine.aclose()
        failed = sum(1 for e in sink.events if isinstance(e, AttemptAbandoned))
        if fake.billing():
            raise SystemExit("instances left billing on the fake")
        return wall, provider.spent_s, sleep.spent_s, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    per_attempt, walls = [], []
    failed = 0
    for n in range(args.runs + 1):
        with tempfile.TemporaryDirectory() as tmp:
            wall, provider_s, waits_s, failed = asyncio.run(one_run(Path(tmp)))
        if n == 0:
            continue  # warm-up: imports, first connection
        walls.append(wall * 1000)
        per_attempt.append((wall - provider_s - waits_s) * 1000 / max(1, failed))
    print(f"walk across hosts: {OFFERS} offers, each host fails after running "
          f"({failed} failed attempts per run), {args.runs} runs")
    print(f"  wall per run                              median {statistics.median(walls):8.1f} ms")
    print(
        f"  own cost per failed attempt (wall - provider - scripted waits)"
        f"  median {statistics.median(per_attempt):6.1f} ms   max {max(per_attempt):6.1f} ms"
        "   target < 100 ms"
    )


if __name__ == "__main__":
    main()

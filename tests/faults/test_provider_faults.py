"""The provider misbehaves while a lease is torn down: destroys that fail, 429 bursts, a
delete that shows only after a few more looks. Teardown retries and is confirmed; when it
cannot be, the run exits 3 naming the lease, and `down --all` finishes the job later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.vastai_server import FakeVast, Fault
from tests.faults.harness import Verdict, cli, unconfirmed

UP_LEASED_DOWN_AFTER = ("up", "--headless", "--yes", "--until", "leased", "--down-after")


def _records(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _destroys(fake: FakeVast) -> int:
    return sum(1 for r in fake.requests if r.method == "DELETE")


@pytest.mark.parametrize("failures", [1, 3])
def test_destroy_failing_a_few_times_is_retried_and_confirmed(
    failures: int, fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    fake.fail_destroy(None, times=failures)
    up = cli(*UP_LEASED_DOWN_AFTER, env=env)
    verdict.exit_code(up.returncode, up.stderr, expected=0, what="up --down-after")
    verdict.nothing_bills(fake, state)
    assert _destroys(fake) == failures + 1
    assert [r["event"] for r in _records(up.stdout)].count("lease_deleted") == 1


def test_destroy_failing_10_times_exits_3_then_down_all_finishes(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    fake.fail_destroy(None, times=10)
    up = cli(*UP_LEASED_DOWN_AFTER, env={**env, "MVP_LEASE_DELETE_TIMEOUT_SECS": "1"})
    verdict.exit_code(up.returncode, up.stderr, expected=3, what="up with destroy failing")
    records = _records(up.stdout)
    running = next(r for r in records if r["event"] == "lease_running")
    run_id = str(next(r for r in records if r["event"] == "run_started")["run_id"])
    unconfirmed(up.stderr, state, str(running["provider_id"]), run_id)
    verdict.left_billing(fake, state, 1)
    fake._destroy_failures.clear()  # the provider recovers
    down = cli("down", "--all", "--yes", env=env)
    verdict.exit_code(down.returncode, down.stderr, expected=0, what="down --all")
    verdict.nothing_bills(fake, state)


def test_429_burst_on_destroy_is_waited_out(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    fake.rate_limit("destroy", 3)
    up = cli(*UP_LEASED_DOWN_AFTER, env=env)
    verdict.exit_code(up.returncode, up.stderr, expected=0, what="up --down-after")
    verdict.nothing_bills(fake, state)
    assert fake._rate_limited.get("destroy", 0) == 0, "the burst was met"


def test_429_burst_on_list_while_an_unclear_create_is_looked_up(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    # The create is performed but answered 500: the walk must find it by its label, through
    # a burst of 429s on the instance list.
    fake.script("create", Fault(status=500, perform=True))
    fake.rate_limit("list", 3)
    up = cli(*UP_LEASED_DOWN_AFTER, env=env)
    verdict.exit_code(up.returncode, up.stderr, expected=0, what="up --down-after")
    verdict.nothing_bills(fake, state)
    assert fake._rate_limited.get("list", 0) == 0, "the burst was met"
    assert len(fake.destroyed()) == 1, "the one instance created was found and destroyed"


def test_429_bursts_on_list_show_and_destroy_during_down_all(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    up = cli("up", "--headless", "--yes", "--until", "leased", env=env)
    verdict.exit_code(up.returncode, up.stderr, expected=0, what="up --until leased")
    verdict.left_billing(fake, state, 1)
    for op in ("list", "show", "destroy"):
        fake.rate_limit(op, 2)
    down = cli("down", "--all", "--yes", env=env)
    verdict.exit_code(down.returncode, down.stderr, expected=0, what="down --all")
    verdict.nothing_bills(fake, state)


@pytest.mark.parametrize("looks", [3])
def test_delete_confirmed_only_after_n_more_looks(
    looks: int, fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    fake.linger_after_destroy(looks)
    up = cli(*UP_LEASED_DOWN_AFTER, env=env)
    verdict.exit_code(up.returncode, up.stderr, expected=0, what="up --down-after")
    verdict.nothing_bills(fake, state)
    (destroyed,) = fake.destroyed()
    looked = [
        r
        for r in fake.requests
        if r.method == "GET" and r.path.rstrip("/").endswith(f"/instances/{destroyed}")
    ]
    assert len(looked) > looks, "confirmed only once the provider stopped showing it"


def test_every_read_failing_after_the_create_ends_the_attempt_not_the_budget(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    """Seed row 117: Vast.ai answers 5xx to every read of the instance after its create.
    The run ends after 5 reads in a row (not the 600 s budget), says the provider, the last
    error and what to do; the destroy is sent, and since no read can confirm it the run
    exits 3 naming the lease. Once the API is back, `down --all` confirms it."""
    fake.script("show", *[Fault(status=502) for _ in range(400)])
    slow = {**env, "MVP_LEASE_READY_TIMEOUT_SECS": "600", "MVP_LEASE_DELETE_TIMEOUT_SECS": "1"}
    up = cli("up", "--headless", "--yes", "--until", "leased", env=slow, timeout=90)
    verdict.exit_code(up.returncode, up.stderr, expected=3, what="up with every read failing")
    assert "the Vast.ai API failed 5 reads" in up.stderr, up.stderr[-2000:]
    assert "502" in up.stderr and "status page" in up.stderr
    records = _records(up.stdout)
    created = next(r for r in records if r["event"] == "attempt_answered")
    run_id = str(next(r for r in records if r["event"] == "run_started")["run_id"])
    unconfirmed(up.stderr, state, str(created["provider_id"]), run_id)
    assert _destroys(fake) >= 1, "the lease's destroy was sent"
    creates = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path
               and "/search/" not in r.path]
    assert len(creates) == 1, "no other offer was tried: its reads would fail alike"
    fake._faults.clear()  # the API is back
    down = cli("down", "--all", "--yes", env=env)
    verdict.exit_code(down.returncode, down.stderr, expected=0, what="down --all")
    verdict.nothing_bills(fake, state)


def test_every_read_failing_while_the_node_is_brought_up_ends_the_attempt(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    """Seed row 117, after the walk: the instance runs (its SSH port refuses, so the
    bring-up would wait its 600 s budget), then every read of it answers 502. The provider
    watch ends the attempt after 5 reads in a row with the cause, the run tries no other
    offer, and exits 3 naming the lease its delete could not confirm."""
    running_reads = 2  # loading, then running: the walk's own reads answer as usual
    fake.script("show", *[Fault(late=True)] * running_reads, *[Fault(status=502)] * 400)
    slow = {**env, "MVP_SSH_READY_TIMEOUT_SECS": "600", "MVP_LEASE_DELETE_TIMEOUT_SECS": "1"}
    up = cli("up", "--headless", "--yes", "--until", "ready", env=slow, timeout=90)
    verdict.exit_code(up.returncode, up.stderr, expected=3, what="up with the API failing")
    records = _records(up.stdout)
    running = next(r for r in records if r["event"] == "lease_running")
    assert "the Vast.ai API failed 5 reads" in up.stderr, up.stderr[-2000:]
    assert "502" in up.stderr and "status page" in up.stderr, up.stderr
    assert "was not ready within" not in up.stderr, "not the bring-up's budget"
    run_id = str(next(r for r in records if r["event"] == "run_started")["run_id"])
    unconfirmed(up.stderr, state, str(running["provider_id"]), run_id)
    creates = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path
               and "/search/" not in r.path]
    assert len(creates) == 1, "no other offer was tried: its reads would fail alike"
    fake._faults.clear()  # the API is back
    down = cli("down", "--all", "--yes", env=env)
    verdict.exit_code(down.returncode, down.stderr, expected=0, what="down --all")
    verdict.nothing_bills(fake, state)

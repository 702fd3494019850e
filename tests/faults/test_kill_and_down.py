"""Leases that outlive the command: `kill -9` at each step of the walk and of bring-up, the
`--until` modes that keep a lease on purpose, two runs sharing a state dir. Whatever was left
is on record, and `mvp-tui down --all --yes` destroys it, confirmed — from any configured
provider, since `down --all` covers every provider on record."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.vastai_server import FakeVast, Fault
from tests.faults.harness import (
    KEY,
    Run,
    Verdict,
    acli,
    cli,
    is_event,
    isolated,
    open_leases,
    until_true,
)


def _ls(env: dict[str, str]) -> list[dict[str, object]]:
    result = cli("ls", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


async def _down_all(env: dict[str, str], fake: FakeVast, state: Path, verdict: Verdict) -> None:
    down = await acli("down", "--all", "--yes", env=env)
    verdict.exit_code(down.returncode, down.stderr, expected=0, what="down --all")
    verdict.nothing_bills(fake, state)


# ---- kill -9 at each step, then `down --all` ----------------------------------------------

Reach = Callable[[Run, FakeVast], Awaitable[None]]


@dataclass(frozen=True)
class Step:
    """Where the kill lands: the fake's script before the run starts, then the wait."""

    reach: Reach
    prepare: Callable[[FakeVast], None] = lambda fake: None


def _answer_never_comes(fake: FakeVast) -> None:
    # The create is performed at once; its answer is held back past the kill.
    fake.script("create", Fault(status=200, perform=True, delay_s=60))


async def _create_sent(run: Run, fake: FakeVast) -> None:
    await run.until(is_event("attempt_started"))
    await until_true("the instance to exist at the provider", lambda: bool(fake.instances()))


def _never_running(fake: FakeVast) -> None:
    for offer in fake.offers():
        fake.stick_loading(int(offer["id"]))


async def _create_answered(run: Run, fake: FakeVast) -> None:
    await run.until(is_event("attempt_answered", outcome="created"))


async def _lease_running(run: Run, fake: FakeVast) -> None:
    await run.until(is_event("lease_running"))


async def _first_ssh_attempt(run: Run, fake: FakeVast) -> None:
    await run.until(is_event("ssh_attempt"), within=60)


async def _agent_started(run: Run, fake: FakeVast) -> None:
    await run.until(is_event("agent_started"), within=60)


WALK_STEPS = {
    "after-create-sent": Step(_create_sent, _answer_never_comes),
    "after-create-answered": Step(_create_answered, _never_running),
    "after-lease-running": Step(_lease_running),
}
BRING_UP_STEPS = {
    "after-first-ssh-attempt": Step(_first_ssh_attempt),
    "after-agent-started": Step(_agent_started),
}


async def _kill_then_down(
    step: Step, fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    step.prepare(fake)
    async with Run(["--yes"], state, env) as run:
        await step.reach(run, fake)
        await run.kill9()
    assert fake.billing(), "the killed run left its instance alive (the case's premise)"
    await _down_all(env, fake, state, verdict)


@pytest.mark.parametrize("step", list(WALK_STEPS))
async def test_kill_9_during_the_walk_then_down_all(
    step: str, fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    await _kill_then_down(WALK_STEPS[step], fake, env, state, verdict)


@pytest.mark.peer("sshd, llama-cpp-python")
@pytest.mark.parametrize("step", list(BRING_UP_STEPS))
async def test_kill_9_during_bring_up_then_down_all(
    step: str, fake: FakeVast, node_env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    await _kill_then_down(BRING_UP_STEPS[step], fake, node_env, state, verdict)


# ---- leases kept on purpose ----------------------------------------------------------------


async def test_until_leased_keeps_the_lease_on_record_for_down(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    up = await acli("up", "--headless", "--yes", "--until", "leased", env=env)
    verdict.exit_code(up.returncode, up.stderr, expected=0, what="up --until leased")
    verdict.left_billing(fake, state, 1)
    (row,) = _ls(env)
    assert row["provider_id"] == str(fake.billing()[0]["id"])
    # No [limits] max_hours set: a rented lease still gets the node's 12 h deadline (seed #115).
    assert isinstance(row["deadline_at"], float)
    assert 11.9 * 3600 < row["deadline_at"] - time.time() <= 12 * 3600
    (create,) = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
    assert create.body["env"]["MVP_MAX_HOURS"] == "12.0"  # the node was told the same deadline
    await _down_all(env, fake, state, verdict)


@pytest.mark.peer("sshd, llama-cpp-python")
async def test_until_ready_keeps_the_serving_node_for_down(
    fake: FakeVast, node_env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    async with Run(["--yes", "--until", "ready"], state, node_env) as run:
        code = await run.ended(within=90, after="--until ready")
    verdict.exit_code(code, run.stderr, expected=0, what="up --until ready")
    assert run.events("node_ready")
    verdict.left_billing(fake, state, 1)
    await _down_all(node_env, fake, state, verdict)


async def test_two_runs_on_one_state_dir_at_once(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    args = ["--yes", "--until", "leased"]
    async with Run(args, state, env) as first, Run(args, state, env) as second:
        codes = await asyncio.gather(
            first.ended(within=60, after="--until leased"),
            second.ended(within=60, after="--until leased"),
        )
    for run, code in zip((first, second), codes, strict=True):
        verdict.exit_code(code, run.stderr, expected=0, what="one of two runs")
    assert first.run_id != second.run_id
    verdict.left_billing(fake, state, 2)
    assert {x.run_id for x in open_leases(state)} == {first.run_id, second.run_id}
    await _down_all(env, fake, state, verdict)


# ---- `down --all` covers every provider on record --------------------------------------------


def _local_profile(state: Path, fake: FakeVast, *, key: bool) -> dict[str, str]:
    """The default profile (local): no provider chosen, the Vast URL (and maybe key) in env."""
    env = {**isolated(state), "MVP_VASTAI_API_URL": fake.url}
    return {**env, "VASTAI_API_KEY": KEY} if key else env


async def test_down_all_from_the_local_profile_destroys_a_recorded_vast_lease(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    up = await acli("up", "--headless", "--yes", "--until", "leased", env=env)
    verdict.exit_code(up.returncode, up.stderr, expected=0, what="up --until leased")
    verdict.left_billing(fake, state, 1)
    local = _local_profile(state, fake, key=True)
    (row,) = _ls(local)  # `ls` lists every provider's open leases
    assert row["provider"] == "vastai" and row["provider_id"] == str(fake.billing()[0]["id"])
    await _down_all(local, fake, state, verdict)


async def test_down_all_without_the_vast_key_exits_3_naming_the_lease(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    up = await acli("up", "--headless", "--yes", "--until", "leased", env=env)
    verdict.exit_code(up.returncode, up.stderr, expected=0, what="up --until leased")
    (instance,) = fake.billing()
    down = await acli("down", "--all", "--yes", env=_local_profile(state, fake, key=False))
    verdict.exit_code(down.returncode, down.stderr, expected=3, what="down --all without a key")
    assert str(instance["id"]) in down.stderr, f"the lease is not named: {down.stderr!r}"
    verdict.left_billing(fake, state, 1)  # still open on record, as at the provider
    await _down_all(env, fake, state, verdict)  # with the key, it goes

"""Signals to `mvp-tui up --headless` (SIGINT, SIGTERM, SIGHUP): the lease is destroyed,
confirmed, then the process exits — 0 when it was serving until a signal, 1 when the signal
cut something short (the walk, prompts queued or streaming), 3 only if teardown could not be
confirmed. A second signal during teardown does not stop it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import Run, Verdict, is_event

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
# Long answers: the first prompt still streams (and the others wait) when the signal lands.
LONG = {"MVP_PROMPT_MAX_TOKENS": "2000", "MVP_MAX_CONTEXT": "4096"}


@pytest.mark.peer("sshd, llama-cpp-python")
@pytest.mark.parametrize("prompts", [0, 1, 3], ids=lambda n: f"{n}-prompts")
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
async def test_signal_on_a_serving_node_tears_down_confirmed(
    sig: signal.Signals,
    prompts: int,
    fake: FakeVast,
    node_env: dict[str, str],
    state: Path,
    verdict: Verdict,
) -> None:
    args = ["--yes"]
    for n in range(prompts):
        args += ["--prompt", f"question {n + 1}: tell me everything"]
    async with Run(args, state, {**node_env, **LONG}) as run:
        await run.until(is_event("node_ready"), within=90)
        if prompts:
            await run.until(is_event("text_delta"), within=30)
            assert not run.events("prompt_done"), "the first answer must still be streaming"
        else:
            await run.until(is_event("prompt_rpc_listening"), within=30)
        run.signal(sig)
        code = await run.ended(within=60, after=f"{sig.name}")
    # Serving until a signal is the mode's normal end; prompts cut short are a failed run.
    verdict.exit_code(code, run.stderr, expected=1 if prompts else 0, what=f"{sig.name}")
    verdict.nothing_bills(fake, state)
    assert run.events("lease_deleted"), "teardown was confirmed by the provider"


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
async def test_signal_during_the_walk_destroys_the_pending_lease(
    sig: signal.Signals, fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    for offer in fake.offers():
        fake.stick_loading(int(offer["id"]))
    async with Run(["--yes"], state, env) as run:
        await run.until(is_event("lease_pending"))
        run.signal(sig)
        code = await run.ended(within=60, after=f"{sig.name} during the walk")
    verdict.exit_code(code, run.stderr, expected=1, what=f"{sig.name} during the walk")
    verdict.nothing_bills(fake, state)
    assert run.events("lease_deleted")


async def test_a_second_signal_during_teardown_does_not_stop_it(
    fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    for offer in fake.offers():
        fake.stick_loading(int(offer["id"]))
    fake.fail_destroy(None, times=2)  # teardown takes a few seconds of retries
    async with Run(["--yes"], state, env) as run:
        await run.until(is_event("lease_pending"))
        run.signal(signal.SIGINT)
        await run.until(is_event("lease_deleting"), within=30)
        run.signal(signal.SIGTERM)
        run.signal(signal.SIGINT)
        code = await run.ended(within=60, after="three signals")
    verdict.exit_code(code, run.stderr, expected=1, what="signals during teardown")
    verdict.nothing_bills(fake, state)
    assert run.events("lease_deleted")


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
async def test_signal_during_bring_up_destroys_the_running_lease(
    sig: signal.Signals, fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    # The instance runs, but its SSH port refuses: bring-up is retrying when the signal lands.
    async with Run(["--yes"], state, env) as run:
        await run.until(is_event("ssh_attempt"), within=30)
        run.signal(sig)
        code = await run.ended(within=60, after=f"{sig.name} during bring-up")
    verdict.exit_code(code, run.stderr, expected=1, what=f"{sig.name} during bring-up")
    verdict.nothing_bills(fake, state)
    assert run.events("lease_deleted")

"""The rented node fails under a serving run (a real sshd, the real agent, llama.cpp): sshd
dies, the node comes back with another host key, the engine dies, the prompt RPC port is
taken. Each ends with the lease destroyed, confirmed by the provider, in bounded time."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.agent.procs import alive
from tests.e2e.headless import weights
from tests.e2e.node import Node
from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import Run, Verdict, is_event

pytestmark = pytest.mark.peer("sshd, llama-cpp-python")


async def test_sshd_killed_after_ready_then_sigterm(
    fake: FakeVast, node: Node, node_env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    async with Run(["--yes"], state, node_env) as run:
        await run.until(is_event("prompt_rpc_listening"), within=90)
        await node.sshd.crash()  # the node is unreachable from now on
        signalled = time.monotonic()
        run.signal(signal.SIGTERM)
        code = await run.ended(within=55, after="SIGTERM with the node unreachable")
        took = time.monotonic() - signalled
    verdict.note("teardown_s", round(took, 1))
    verdict.exit_code(code, run.stderr, expected=0, what="SIGTERM, node unreachable")
    verdict.nothing_bills(fake, state)
    assert run.events("lease_deleted"), "the provider confirmed the destroy"
    assert took < 30, f"teardown with an unreachable node took {took:.1f} s"


async def test_a_new_host_key_on_reconnect_is_refused_and_torn_down(
    fake: FakeVast, node: Node, node_env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    sshd = node.sshd
    # [lease] on_node_loss = "stop": the run ends (the replacing walk has its own tests).
    async with Run(["--yes", "--on-node-loss", "stop"], state, node_env) as run:
        await run.until(is_event("prompt_rpc_listening"), within=90)
        pinned = run.events("host_key_pinned")[0]["fingerprint"]
        await sshd.crash()
        sshd.rekey()  # the "same" node answers with another host key: refuse it
        await sshd.start()
        code = await run.ended(within=45, after="the node's host key changed")
    verdict.exit_code(code, run.stderr, expected=1, what="host key changed on reconnect")
    verdict.nothing_bills(fake, state)
    assert sshd.fingerprint != pinned
    err = run.stderr.lower()
    assert "host key" in err and ("changed" in err or sshd.fingerprint.lower() in err), (
        f"stderr does not name the host key change: {run.stderr!r}"
    )


async def test_the_engine_killed_on_the_node_is_fatal_and_torn_down(
    fake: FakeVast, node: Node, node_env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    async with Run(["--yes", "--on-node-loss", "stop"], state, node_env) as run:
        await run.until(is_event("prompt_rpc_listening"), within=90)
        engine_pid = int((await run.until(weights("WeightsLoaded")))["payload"]["engine_pid"])
        assert alive(engine_pid), "the node's llama.cpp server runs"
        os.kill(engine_pid, signal.SIGKILL)
        code = await run.ended(within=60, after="the engine was killed")
    verdict.exit_code(code, run.stderr, expected=1, what="engine killed on the node")
    verdict.nothing_bills(fake, state)
    assert not alive(engine_pid)
    assert run.events("lease_deleted")


async def test_a_busy_prompt_rpc_port_fails_the_run_and_tears_down(
    fake: FakeVast, node_env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**node_env, "MVP_PROMPT_RPC_BIND": f"127.0.0.1:{port}"}
        async with Run(["--yes"], state, env) as run:
            code = await run.ended(within=90, after="serving with the RPC port taken")
    verdict.exit_code(code, run.stderr, expected=1, what="RPC port taken")
    verdict.nothing_bills(fake, state)
    lines = [ln for ln in run.stderr.splitlines() if str(port) in ln and "rpc_addr" in ln]
    assert lines, f"stderr does not name [prompt] rpc_addr and port {port}: {run.stderr!r}"
    assert run.events("lease_deleted")

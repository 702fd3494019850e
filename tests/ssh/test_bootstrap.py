"""NodeSession against a real sshd: launch, lines, retries with back-off, reconnects, teardown."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import stat
import time
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.ssh import (
    AgentExited,
    AgentStarted,
    AgentStop,
    AttemptOutcome,
    AuthFailed,
    BootstrapReady,
    BootstrapTimedOut,
    LogPositions,
    Phase,
    SessionClosed,
    SshAttempt,
    SshSettings,
    StopReason,
)
from mvp_tui.ssh.identity import load_identity
from tests.ssh.conftest import FAST, STANDIN, SshHarness
from tests.ssh.sshd import Sshd, cmdline, processes_in, processes_mentioning, running, write_key

TOKEN = "tok-9f8e7d6c5b4a"


def standin_env(**extra: str) -> dict[str, str]:
    env = {
        "MVP_RUN_ID": "r-7f3a",
        "STANDIN_TOKEN": TOKEN,
        "STANDIN_TOKEN_EXPECTED_SHA": hashlib.sha256(TOKEN.encode()).hexdigest(),
    }
    env.update(extra)
    return env


def numbered(harness: SshHarness) -> list[str]:
    return [line for line in harness.stdout() if line.startswith("line ")]


async def test_agent_starts_detached_and_its_lines_arrive_in_order(
    sshd: Sshd, harness: SshHarness
) -> None:
    session = harness.session()
    env = standin_env(STANDIN_LINES="25")
    pid = await session.start_agent(STANDIN, env, str(harness.remote_dir))
    assert pid > 0
    await harness.wait_for(lambda: bool(harness.of(AgentExited)))
    assert harness.stdout() == ["token-ok", "ready", *[f"line {n}" for n in range(1, 26)]]
    assert harness.stderr() == ["err 10", "err 20"]
    # Positions are the byte counts of the logs: every byte delivered exactly once.
    assert session.positions.stdout == (harness.remote_dir / "stdout.log").stat().st_size
    assert session.positions.stderr == (harness.remote_dir / "stderr.log").stat().st_size
    started = harness.of(AgentStarted)
    assert [(e.pid, e.remote_dir, e.resumed) for e in started] == [
        (pid, str(harness.remote_dir), False)
    ]
    assert await session.close() is AgentStop.NOT_RUNNING


async def test_env_reaches_the_agent_through_a_private_file_never_the_command_line(
    sshd: Sshd, harness: SshHarness
) -> None:
    session = harness.session()
    pid = await session.start_agent(STANDIN, standin_env(STANDIN_HOLD="1"), str(harness.remote_dir))
    await harness.wait_for(lambda: "ready" in harness.stdout())
    assert "token-ok" in harness.stdout()
    env_file = harness.remote_dir / "run.sh"  # the launcher carries the env
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert cmdline(pid).endswith(b"\x00agent.pyz\x00")  # the agent, by its file
    assert processes_mentioning(TOKEN) == []  # on no command line of the node
    assert all(TOKEN not in line for line in harness.provider_lines)
    assert all(TOKEN not in e.to_json() for e in harness.events)
    assert await session.close() is AgentStop.SHUTDOWN
    assert not running(pid)


async def test_while_sshd_is_down_its_port_is_probed_and_the_login_follows_the_answer(
    stopped_sshd: Sshd, harness: SshHarness
) -> None:
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)
        if len(delays) == 5:
            await stopped_sshd.start()

    settings = SshSettings(backoff_initial=1.0, backoff_factor=2.0, backoff_cap=4.0)
    session = harness.session(settings, sleep=sleep)
    await session.start_agent(STANDIN, standin_env(), str(harness.remote_dir))
    # A port with nothing behind it is probed every second, no back-off: one failed login,
    # five probes, then the login at the first answer.
    assert len(delays) == 5 and all(0.5 < d <= 1.0 for d in delays), delays
    attempts = harness.of(SshAttempt)
    assert [(a.attempt, a.outcome, a.next_try_s) for a in attempts[:2]] == [
        (1, AttemptOutcome.NOT_LISTENING, 1.0),
        (2, AttemptOutcome.CONNECTED, None),
    ]
    assert all(a.target == f"127.0.0.1:{stopped_sshd.port}" for a in attempts)
    # One provider line announces each attempt, as in the seed; the probes print none.
    announced = [line for line in harness.provider_lines if line.startswith("ssh attempt ")]
    assert [line for line in announced if " to root@" in line] == [
        f"ssh attempt {n} to root@127.0.0.1:{stopped_sshd.port} (bootstrap)" for n in (1, 2)
    ]
    assert any(
        line.startswith("ssh attempt 1: not_listening: no sshd answering yet")
        and line.endswith("waiting for sshd (its banner probed every 1s)")
        for line in harness.provider_lines
    )
    await session.close()


async def test_the_login_comes_within_a_second_of_sshd_answering_not_after_a_back_off(
    stopped_sshd: Sshd, harness: SshHarness
) -> None:
    # A back-off this long would make a late login obvious; sshd comes up 2.5 s in.
    settings = dataclasses.replace(FAST, backoff_initial=8.0, backoff_cap=30.0)
    session = harness.session(settings)
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def sshd_comes_up() -> float:
        await asyncio.sleep(2.5)  # the node's boot, a scripted stand-in
        await stopped_sshd.start()  # returns once sshd listens
        return time.time()

    up = asyncio.create_task(sshd_comes_up())
    await session.start_agent(STANDIN, standin_env(), str(harness.remote_dir))
    answering_at = await up
    connected = [a for a in harness.of(SshAttempt) if a.outcome is AttemptOutcome.CONNECTED]
    assert connected and len(harness.of(SshAttempt)) == 2  # one failed login, one that worked
    logged_in_after = connected[0].at - answering_at
    assert logged_in_after < 1.5, f"logged in {logged_in_after:.2f} s after sshd answered"
    assert loop.time() - started < 2.5 + 3.0
    await session.close()


async def test_failed_logins_against_a_live_sshd_still_back_off(
    sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    stranger = await load_identity(
        write_key(tmp_path / "stranger", asyncssh.generate_private_key("ssh-ed25519")),
        use_env_agent=False,
    )
    settings = dataclasses.replace(FAST, backoff_initial=1.0, backoff_cap=4.0, auth_attempts=3)
    session = harness.session(settings, sleep=sleep, identity=stranger)
    with pytest.raises(AuthFailed):
        await session.start_agent(STANDIN, standin_env(), str(harness.remote_dir))
    assert delays == [1.0, 2.0]  # the back-off, for logins that sshd refused
    await session.close()


def test_default_backoff_is_one_second_doubling_to_thirty() -> None:
    settings = SshSettings()
    assert (settings.backoff_initial, settings.backoff_factor, settings.backoff_cap) == (
        1.0,
        2.0,
        30.0,
    )


async def test_an_agent_that_exits_before_ready_is_started_again(
    sshd: Sshd, harness: SshHarness
) -> None:
    session = harness.session()
    await session.start_agent(
        STANDIN, standin_env(STANDIN_EXIT_FIRST="1", STANDIN_HOLD="1"), str(harness.remote_dir)
    )
    await harness.wait_for(lambda: "ready" in harness.stdout())
    session.ready.set()
    exited = harness.of(AgentExited)
    assert [(e.exit_code, e.before_ready) for e in exited] == [(3, True)]
    outcomes = [a.outcome for a in harness.of(SshAttempt)]
    assert outcomes[:3] == [
        AttemptOutcome.CONNECTED,
        AttemptOutcome.AGENT_EXITED,
        AttemptOutcome.CONNECTED,
    ]
    started = harness.of(AgentStarted)
    assert len(started) == 2 and started[0].pid != started[1].pid
    assert "standin: failing the first run on purpose" in harness.stderr()
    assert await session.close() is AgentStop.SHUTDOWN
    assert not running(started[1].pid)


async def test_sshd_crash_mid_stream_resumes_lines_without_gap_or_duplicate(
    sshd: Sshd, harness: SshHarness
) -> None:
    session = harness.session()
    total = 150
    await session.start_agent(
        STANDIN,
        standin_env(STANDIN_LINES=str(total), STANDIN_DELAY="0.01"),
        str(harness.remote_dir),
    )
    await harness.wait_for(lambda: "ready" in harness.stdout())
    session.ready.set()
    await harness.wait_for(lambda: len(numbered(harness)) >= 20)
    await sshd.crash()
    await harness.wait_for(
        lambda: any(a.outcome is AttemptOutcome.DROPPED for a in harness.of(SshAttempt))
    )
    seen_at_crash = len(numbered(harness))
    await sshd.start()
    assert await asyncio.wait_for(session.wait(), 30) is StopReason.AGENT_EXITED
    assert numbered(harness) == [f"line {n}" for n in range(1, total + 1)]
    assert seen_at_crash < total, "the crash should have happened mid-stream"
    assert harness.stderr() == [f"err {n}" for n in range(10, total + 1, 10)]
    assert session.positions.stdout == (harness.remote_dir / "stdout.log").stat().st_size
    connected = [a for a in harness.of(SshAttempt) if a.outcome is AttemptOutcome.CONNECTED]
    assert len(connected) >= 2
    assert len(harness.of(AgentStarted)) == 1  # the agent survived the drop: not relaunched
    await session.close()
    closed = harness.of(SessionClosed)
    assert [c.agent for c in closed] == [AgentStop.NOT_RUNNING]


@pytest.mark.parametrize("stubborn", [False, True])
async def test_close_stops_the_agent_and_leaves_no_task_or_process(
    sshd: Sshd, harness: SshHarness, stubborn: bool
) -> None:
    before = asyncio.all_tasks()
    env = standin_env(STANDIN_HOLD="1", STANDIN_IGNORE_SHUTDOWN="1" if stubborn else "0")
    session = harness.session(dataclasses.replace(FAST, shutdown_grace=0.3))
    pid = await session.start_agent(STANDIN, env, str(harness.remote_dir))
    await harness.wait_for(lambda: "ready" in harness.stdout())
    wrapper = int((harness.remote_dir / "wrapper.pid").read_text())
    assert running(pid) and running(wrapper)
    assert {pid, wrapper} <= set(processes_in(harness.remote_dir))
    stop = await session.close()
    assert stop is (AgentStop.KILLED if stubborn else AgentStop.SHUTDOWN)
    assert not running(pid) and not running(wrapper)
    assert asyncio.all_tasks() - before == set()
    assert processes_in(harness.remote_dir) == []


async def test_after_ready_a_node_that_stays_gone_ends_the_loop_at_the_reconnect_timeout(
    sshd: Sshd, harness: SshHarness
) -> None:
    settings = dataclasses.replace(FAST, reconnect_timeout=1.0)
    session = harness.session(settings)
    await session.start_agent(STANDIN, standin_env(STANDIN_HOLD="1"), str(harness.remote_dir))
    await harness.wait_for(lambda: "ready" in harness.stdout())
    session.ready.set()
    await sshd.crash()
    assert await asyncio.wait_for(session.wait(), 15) is StopReason.TIMED_OUT
    assert session.failure is not None and "no connection again within 1s" in str(session.failure)
    attempts = harness.of(SshAttempt)
    assert {a.phase for a in attempts[1:]} == {Phase.SERVING}
    assert attempts[-1].next_try_s is None  # the last one says no further try
    assert [e.attempts for e in harness.of(BootstrapReady)] == [1]
    await session.close(shutdown_agent=False)
    await sshd.start()  # clean up the "node": stop the agent through a new session
    cleanup = harness.session()
    await cleanup.start_agent(STANDIN, {}, str(harness.remote_dir), resume=session.positions)
    assert await cleanup.close() is AgentStop.SHUTDOWN


async def test_a_setup_that_fails_on_the_node_is_retried_then_named_at_the_timeout(
    sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    session = harness.session(dataclasses.replace(FAST, ready_timeout=1.0))
    with pytest.raises(BootstrapTimedOut) as timed_out:
        await session.start_agent(STANDIN, {}, str(blocker / "run"))
    outcomes = [a.outcome for a in harness.of(SshAttempt)]
    assert outcomes.count(AttemptOutcome.COMMAND_FAILED) >= 2  # retried, with back-off
    assert str(blocker / "run") in str(timed_out.value)
    await session.close()


async def test_resume_where_no_agent_runs_starts_one(sshd: Sshd, harness: SshHarness) -> None:
    session = harness.session()
    pid = await session.start_agent(
        STANDIN, standin_env(STANDIN_LINES="3"), str(harness.remote_dir), resume=LogPositions()
    )
    await harness.wait_for(lambda: "line 3" in harness.stdout())
    outcomes = [a.outcome for a in harness.of(SshAttempt)]
    assert outcomes[:2] == [AttemptOutcome.CONNECTED, AttemptOutcome.COMMAND_FAILED]
    assert "no agent running" in harness.of(SshAttempt)[1].detail
    assert [e.pid for e in harness.of(AgentStarted)] == [pid]
    await session.close()

"""Host keys: pinned on first connect per lease, required on every later connection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mvp_tui.ssh import (
    AgentStarted,
    AgentStop,
    AttemptOutcome,
    FilePins,
    HostKeyChanged,
    HostKeyPinned,
    SessionStopped,
    SshAttempt,
    StopReason,
)
from mvp_tui.ssh.hostkeys import fingerprint_of
from tests.ssh.conftest import STANDIN, SshHarness
from tests.ssh.sshd import Sshd


async def test_first_connect_pins_the_key_and_a_changed_key_is_refused(
    sshd: Sshd, harness: SshHarness
) -> None:
    first = harness.session()
    await first.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
    pinned = harness.pins.get("vastai:7002")
    assert pinned is not None and fingerprint_of(pinned) == sshd.fingerprint
    assert [e.fingerprint for e in harness.of(HostKeyPinned)] == [sshd.fingerprint]
    old = sshd.fingerprint
    await first.close()

    # The node comes back with another host key (rebuilt, or someone in between).
    await sshd.stop()
    sshd.rekey()
    await sshd.start()
    harness.events.clear()
    second = harness.session()
    with pytest.raises(HostKeyChanged) as refused:
        await second.start_agent(STANDIN, {}, str(harness.remote_dir))
    text = str(refused.value)
    assert "vastai:7002" in text and old in text and sshd.fingerprint in text
    assert (refused.value.pinned, refused.value.seen) == (old, sshd.fingerprint)
    # Refused at once: one attempt, no retry, and the pin is unchanged.
    attempts = harness.of(SshAttempt)
    assert [(a.attempt, a.outcome, a.next_try_s) for a in attempts] == [
        (1, AttemptOutcome.HOST_KEY_CHANGED, None)
    ]
    assert harness.pins.get("vastai:7002") == pinned
    stopped = harness.of(SessionStopped)
    assert [s.reason for s in stopped] == [StopReason.HOST_KEY_CHANGED]
    assert old in stopped[0].detail and sshd.fingerprint in stopped[0].detail
    assert any(old in line and sshd.fingerprint in line for line in harness.provider_lines)
    await second.close()


async def test_reattach_after_restart_checks_the_pin_from_disk_and_resumes_lines(
    sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    harness.pins = FilePins(tmp_path / "state" / "pins.json")
    env = {"STANDIN_LINES": "40", "STANDIN_DELAY": "0.03"}
    first = harness.session()
    pid = await first.start_agent(STANDIN, env, str(harness.remote_dir))
    await harness.wait_for(lambda: "line 5" in harness.stdout())
    # The dashboard quits without stopping the agent (it will re-attach).
    assert await first.close(shutdown_agent=False) is AgentStop.LEFT_RUNNING
    positions = first.positions
    on_disk = json.loads((tmp_path / "state" / "pins.json").read_text())
    assert fingerprint_of(on_disk["vastai:7002"]) == sshd.fingerprint

    # A new process: pins come from the file, lines continue where they stopped.
    harness.pins = FilePins(tmp_path / "state" / "pins.json")
    ready = asyncio.Event()
    ready.set()  # the record says the node was serving
    second = harness.session(ready=ready)
    resumed_pid = await second.start_agent(STANDIN, env, str(harness.remote_dir), resume=positions)
    assert resumed_pid == pid  # followed, not launched again
    assert [e.resumed for e in harness.of(AgentStarted)] == [False, True]
    assert await asyncio.wait_for(second.wait(), 30) is StopReason.AGENT_EXITED
    assert harness.stdout().count("ready") == 1
    assert [line for line in harness.stdout() if line.startswith("line ")] == [
        f"line {n}" for n in range(1, 41)
    ]
    assert [line for line in harness.stderr()] == [f"err {n}" for n in (10, 20, 30, 40)]
    await second.close()


def test_file_pins_survive_a_new_instance_and_are_written_atomically(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    pins = FilePins(path)
    assert pins.get("vastai:1") is None
    pins.pin("vastai:1", "ssh-ed25519 AAAA1")
    pins.pin("vastai:2", "ssh-ed25519 AAAA2")
    again = FilePins(path)
    assert again.get("vastai:1") == "ssh-ed25519 AAAA1"
    assert again.get("vastai:2") == "ssh-ed25519 AAAA2"
    assert [p.name for p in tmp_path.iterdir()] == ["pins.json"]  # no temp file left behind

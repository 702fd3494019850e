"""The Vast host key rotation over the verified session, against a real sshd: made on the
node, pending before it is swapped in, confirmed by a fresh connection; a key file that is not
the verified one is never touched; an sshd that does not reload keeps both keys known, and a
crash mid-rotation strands no later connection."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.ssh import HostKeyPinned
from mvp_tui.ssh.host_key_rotation import RotationPlace
from mvp_tui.ssh.hostkeys import MemoryPins, fingerprint_of, openssh_public
from tests.ssh.conftest import STANDIN, SshHarness
from tests.ssh.sshd import Sshd

LEASE = "vastai:7002"


def _pin_served(harness: SshHarness, sshd: Sshd) -> str:
    """The key pinned before create, already installed by the instance's onstart."""
    pinned = openssh_public(sshd.host_key)
    harness.pins = MemoryPins()
    harness.pins.pin(LEASE, pinned)
    return pinned


async def test_rotated_on_the_node_pinned_and_served(sshd: Sshd, harness: SshHarness) -> None:
    before = _pin_served(harness, sshd)
    session = harness.session(awaiting_pin=True, rotate=RotationPlace(
        ssh_dir=str(sshd.dir), sshd_pidfile=str(sshd.pidfile)))
    await session.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
    now = harness.pins.get(LEASE)
    assert now is not None and now != before and harness.pins.pending(LEASE) is None
    assert fingerprint_of(now) == sshd.served_key().get_fingerprint()
    (first, rotated) = harness.of(HostKeyPinned)
    assert first.before_create and rotated.rotated_from == fingerprint_of(before)
    assert rotated.fingerprint == fingerprint_of(now)
    assert any("rotated to" in line and "made on the node" in line
               for line in harness.provider_lines)
    await session.close()
    # Every later connection (a reconnect, a re-attach) requires the new key.
    again = harness.session()
    await again.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
    await again.close()


async def test_a_key_file_that_is_not_the_verified_one_is_left_alone(
    sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    before = _pin_served(harness, sshd)
    elsewhere = tmp_path / "etc-ssh"  # another sshd's keys (this machine's own, say)
    elsewhere.mkdir()
    other = Sshd(sshd.exe, tmp_path / "other")
    (elsewhere / "ssh_host_ed25519_key").write_bytes(other.host_key_path.read_bytes())
    (elsewhere / "ssh_host_ed25519_key").chmod(0o600)
    listed = sorted(p.name for p in elsewhere.iterdir())
    session = harness.session(awaiting_pin=True, rotate=RotationPlace(
        ssh_dir=str(elsewhere), sshd_pidfile=str(sshd.pidfile)))
    await session.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
    assert harness.pins.get(LEASE) == before and harness.pins.pending(LEASE) is None
    assert sorted(p.name for p in elsewhere.iterdir()) == listed
    assert any("does not hold the key this session verified" in line
               for line in harness.provider_lines)
    assert sshd.served_key().get_fingerprint() == fingerprint_of(before)
    await session.close()


async def test_an_sshd_that_does_not_reload_keeps_both_keys_known(
    sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    """The swap happened but sshd never got the reload (a wrong pid file): the old key still
    answers, the new one is pending; once sshd restarts with the new key (the node's next
    boot, or a process that stopped mid-rotation), a connection that shows it is accepted and
    settles the pin — no stranded re-attach."""
    before = _pin_served(harness, sshd)
    idle = tmp_path / "idle.pid"
    idle.write_text("999999999\n")  # no such process: the HUP reaches nobody
    session = harness.session(awaiting_pin=True, rotate=RotationPlace(
        ssh_dir=str(sshd.dir), sshd_pidfile=str(idle)))
    await session.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
    pending = harness.pins.pending(LEASE)
    assert harness.pins.get(LEASE) == before and pending is not None
    assert fingerprint_of(pending) == sshd.served_key().get_fingerprint()
    assert any("not confirmed" in line for line in harness.provider_lines)
    await session.close()
    await sshd.stop()
    sshd.host_key = sshd.served_key()
    await sshd.start()
    later = harness.session()
    await later.start_agent(STANDIN, {"STANDIN_HOLD": "1"}, str(harness.remote_dir))
    assert harness.pins.get(LEASE) == pending and harness.pins.pending(LEASE) is None
    await later.close()

"""Pinned first contact on Vast: the host key is made before create, its public half pinned in
the record, its private half sent in pieces Vast accepts (never shown), and the instance's
real onstart lines install it into a real sshd, which then presents that key alone."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
from pathlib import Path

import asyncssh

from mvp_tui.providers.base import CreateRequest, Outcome, SelectionPolicy
from mvp_tui.providers.vastai.boot import vast_onstart
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.providers.vastai.host_key import (
    PIECE_CHARS,
    PIECE_PREFIX,
    SSH_DIR_ENV,
    SSHD_PIDFILE_ENV,
    HostKeyPlan,
    install_script,
)
from tests.fakes.vastai_server import FakeVast
from tests.ssh.pinned_key import pinned_key
from tests.ssh.sshd import Sshd, sshd_executable, write_key

REQUEST = CreateRequest(label="mvp-r7f3a-1-1", image="img:1", env={"MVP_RUN_ID": "r7f3a"},
                        disk_gb=20)


def test_the_private_half_travels_in_pieces_vast_takes() -> None:
    plan = HostKeyPlan.new()
    pieces = plan.env()
    assert len(pieces) >= 2 and all(len(v) <= PIECE_CHARS <= 256 for v in pieces.values())
    assert list(pieces) == [f"{PIECE_PREFIX}{n}" for n in range(1, len(pieces) + 1)]
    private = asyncssh.import_private_key(base64.b64decode("".join(pieces.values())))
    assert private.export_public_key().decode().strip() == plan.public


async def test_create_carries_the_key_pinned_before_it_and_never_shows_it(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    public = provider.host_key_for(REQUEST.label)
    assert public is not None and public.startswith("ssh-ed25519 ")
    fake.add_offer()
    (offer,) = await provider.search_offers(SelectionPolicy(require_verified=False))
    result = await provider.create(offer, REQUEST)
    assert result.outcome is Outcome.CREATED
    (put,) = [r for r in fake.requests if r.method == "PUT"]
    sent = pinned_key(put.body["env"])
    assert sent is not None
    assert asyncssh.import_private_key(sent).export_public_key().decode().strip() == public
    assert put.body["onstart"] == vast_onstart(None)  # the install lines run first
    piece = put.body["env"][f"{PIECE_PREFIX}1"]
    assert piece not in provider._redact(f"an error body echoing {piece}")  # never shown


async def test_pin_host_key_off_sends_no_key(fake: FakeVast) -> None:
    provider = VastAiProvider(api_key=fake.api_key, api_url=fake.url, pin_host_key=False)
    try:
        assert provider.host_key_for(REQUEST.label) is None
        fake.add_offer()
        (offer,) = await provider.search_offers(SelectionPolicy(require_verified=False))
        await provider.create(offer, REQUEST)
        (put,) = [r for r in fake.requests if r.method == "PUT"]
        assert not any(k.startswith(PIECE_PREFIX) for k in put.body["env"])
    finally:
        await provider.aclose()


async def test_the_onstart_lines_install_the_key_into_a_running_sshd(tmp_path: Path) -> None:
    sshd = Sshd(sshd_executable(), tmp_path / "sshd")
    sshd.host_key_path = write_key(sshd.dir / "ssh_host_ed25519_key", sshd.host_key)
    for other in ("rsa", "ecdsa", "dsa"):
        (sshd.dir / f"ssh_host_{other}_key").write_text("a key type sshd would also offer\n")
    await sshd.start()
    try:
        before = await asyncssh.get_server_host_key("127.0.0.1", sshd.port)
        assert before is not None and before.get_fingerprint() == sshd.fingerprint
        plan = HostKeyPlan.new()
        assert sshd.process is not None
        pidfile = tmp_path / "sshd.pid"
        pidfile.write_text(f"{sshd.process.pid}\n")
        env = {"PATH": os.environ["PATH"], SSH_DIR_ENV: str(sshd.dir),
               SSHD_PIDFILE_ENV: str(pidfile), **plan.env()}
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", install_script(), env=env, stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0 and b"pinned ssh host key installed" in err, err
        assert not list(sshd.dir.glob("ssh_host_*sa_key"))
        assert (sshd.dir / "ssh_host_ed25519_key").exists()
        mode = (sshd.dir / "ssh_host_ed25519_key").stat().st_mode & 0o777
        assert mode == 0o600
        expected = asyncssh.import_public_key(plan.public).get_fingerprint()
        seen = None
        for _ in range(100):  # sshd re-execs on SIGHUP: a connect in that instant is refused
            try:
                key = await asyncssh.get_server_host_key("127.0.0.1", sshd.port)
            except OSError:
                continue
            seen = key.get_fingerprint() if key is not None else None
            if seen == expected:
                break
        assert seen == expected, "sshd still presents its own key"
    finally:
        await sshd.stop()


def test_without_a_key_the_onstart_lines_do_nothing(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], SSH_DIR_ENV: str(tmp_path)}
    done = subprocess.run(["/bin/sh", "-c", install_script()], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == "" and list(tmp_path.iterdir()) == []


def test_the_pieces_are_gone_before_the_guard_and_a_traced_user_onstart_never_shows_them(
    tmp_path: Path,
) -> None:
    """Vast runs the merged onstart with the create's env: after mvp-tui's install no piece
    variable is left for the guard, the prefetch or the user's text (nor what they start),
    and a user's `#!/bin/bash -x` traces none of the key while it is installed."""
    plan = HostKeyPlan.new()
    out = tmp_path / "env-of-the-users-onstart"
    user = f"#!/bin/bash -x\nenv > {out}\n"
    script = tmp_path / "onstart.sh"
    script.write_text(vast_onstart(user))
    env = {"PATH": os.environ["PATH"], SSH_DIR_ENV: str(tmp_path / "ssh"),
           SSHD_PIDFILE_ENV: str(tmp_path / "no-pidfile"), "MVP_BOOT_GRACE_S": "0",
           "MVP_BOOT_GUARD_DIR": str(tmp_path / "guard"), **plan.env()}
    (tmp_path / "ssh").mkdir()
    done = subprocess.run(["bash", "-x", str(script)], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert "pinned ssh host key installed" in done.stderr
    key = (tmp_path / "ssh" / "ssh_host_ed25519_key").read_bytes()
    assert base64.b64encode(key).decode() == plan.private_b64
    pieces = list(plan.env().values())
    assert not any(piece in done.stderr for piece in pieces), "the trace shows the host key"
    assert "+ env" in done.stderr  # tracing is back on for the user's own lines
    left = out.read_text()
    assert PIECE_PREFIX not in left and not any(piece in left for piece in pieces)

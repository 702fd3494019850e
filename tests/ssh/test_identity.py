"""The SSH identity: key files, clear errors, and encrypted keys through a real ssh-agent."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mvp_tui.ssh import IdentityError, load_identity
from mvp_tui.ssh.identity import IdentitySource
from tests.peers import require_executable
from tests.ssh.conftest import STANDIN, SshHarness
from tests.ssh.sshd import Sshd

PASSPHRASE = "correct horse battery"
OPENSSH_FIX = "apt-get install -y openssh-client"


def keygen(path: Path, passphrase: str = "") -> Path:
    exe = require_executable("ssh-keygen", ["ssh-keygen"], OPENSSH_FIX)
    subprocess.run(
        [exe, "-q", "-t", "ed25519", "-N", passphrase, "-C", "me@laptop", "-f", str(path)],
        check=True,
    )
    return path


def keygen_fingerprint(path: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()[1]


@contextlib.asynccontextmanager
async def ssh_agent(tmp_path: Path) -> AsyncIterator[str]:
    """A real ssh-agent in the foreground on its own socket; yields the socket path."""
    exe = require_executable("ssh-agent", ["ssh-agent"], OPENSSH_FIX)
    sock = tmp_path / "agent.sock"
    agent = await asyncio.create_subprocess_exec(
        exe, "-D", "-a", str(sock), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert agent.stdout is not None
        # It prints its SSH_AUTH_SOCK line once it listens.
        line = await asyncio.wait_for(agent.stdout.readline(), 10)
        assert b"SSH_AUTH_SOCK" in line, line
        yield str(sock)
    finally:
        agent.terminate()
        await agent.wait()


async def ssh_add(sock: str, key: Path, tmp_path: Path) -> None:
    """Add `key` to the agent, answering its passphrase prompt from a script, never a TTY."""
    askpass = tmp_path / "askpass.sh"
    askpass.write_text(f"#!/bin/sh\necho '{PASSPHRASE}'\n")
    askpass.chmod(0o700)
    env = {
        "SSH_AUTH_SOCK": sock,
        "SSH_ASKPASS": str(askpass),
        "SSH_ASKPASS_REQUIRE": "force",
        "DISPLAY": ":0",
        "PATH": "/usr/bin:/bin",
    }
    add = await asyncio.create_subprocess_exec(
        "ssh-add",
        str(key),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await add.communicate()
    assert add.returncode == 0, err


async def test_a_missing_key_names_the_path_the_config_key_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "id_ed25519"
    with pytest.raises(IdentityError) as error:
        await load_identity(missing, use_env_agent=False)
    text = str(error.value)
    assert str(missing) in text
    assert "[vastai] ssh_identity" in text and "MVP_VASTAI_SSH_IDENTITY" in text
    assert "ssh-keygen -t ed25519" in error.value.fix


async def test_the_default_is_id_ed25519_under_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(IdentityError, match=str(tmp_path / ".ssh" / "id_ed25519")):
        await load_identity(None, use_env_agent=False)
    (tmp_path / ".ssh").mkdir()
    keygen(tmp_path / ".ssh" / "id_ed25519")
    identity = await load_identity("~/.ssh/id_ed25519", use_env_agent=False)
    assert identity.path == tmp_path / ".ssh" / "id_ed25519"


async def test_unreadable_or_bogus_files_are_refused_clearly(tmp_path: Path) -> None:
    bogus = tmp_path / "id_bogus"
    bogus.write_text("not a key\n")
    with pytest.raises(IdentityError, match="not a private key"):
        await load_identity(bogus, use_env_agent=False)
    with pytest.raises(IdentityError, match="is a directory"):
        await load_identity(tmp_path, use_env_agent=False)


async def test_a_plain_key_gives_its_public_half_and_fingerprint_never_its_secret(
    tmp_path: Path,
) -> None:
    key = keygen(tmp_path / "id_ed25519")
    identity = await load_identity(key, use_env_agent=False)
    assert identity.source is IdentitySource.FILE
    public_fields = (tmp_path / "id_ed25519.pub").read_text().split()
    assert identity.public_openssh == " ".join(public_fields[:2])  # the comment is left out
    assert identity.fingerprint == keygen_fingerprint(key)
    secret_body = "".join(key.read_text().splitlines()[1:-1])
    for text in (repr(identity), str(identity)):
        assert "PRIVATE" not in text and secret_body[20:60] not in text


async def test_an_encrypted_key_without_an_agent_is_refused_without_prompting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = keygen(tmp_path / "id_ed25519", PASSPHRASE)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with pytest.raises(IdentityError) as error:
        await load_identity(key)
    text = str(error.value)
    assert str(key) in text and keygen_fingerprint(key) in text
    assert "never prompts" in text and f"ssh-add {key}" in error.value.fix
    assert PASSPHRASE not in text


async def test_an_encrypted_key_the_agent_does_not_hold_is_refused(tmp_path: Path) -> None:
    key = keygen(tmp_path / "id_ed25519", PASSPHRASE)
    other = keygen(tmp_path / "id_other", PASSPHRASE)
    async with ssh_agent(tmp_path) as sock:
        await ssh_add(sock, other, tmp_path)
        with pytest.raises(IdentityError, match="does not hold it"):
            await load_identity(key, agent_path=sock)


async def test_an_encrypted_key_held_by_ssh_agent_reaches_the_node(
    stopped_sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    key = keygen(tmp_path / "id_enc", PASSPHRASE)
    fingerprint = keygen_fingerprint(key)
    (tmp_path / "id_enc.pub").unlink()  # the public half comes from the key file's header
    async with ssh_agent(tmp_path) as sock:
        await ssh_add(sock, key, tmp_path)
        identity = await load_identity(key, agent_path=sock)
        assert identity.source is IdentitySource.AGENT
        assert identity.fingerprint == fingerprint
        stopped_sshd.authorize(identity.public_openssh)
        await stopped_sshd.start()
        session = harness.session(identity=identity)
        pid = await session.start_agent(STANDIN, {}, str(harness.remote_dir))
        assert pid > 0
        await session.close()

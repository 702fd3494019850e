"""One bring-up puts one artifact on a node: the agent's zipapp (which also follows and stops
the agent, `agent.pyz follow|stop`) and its launcher `run.sh` (which carries the env), and
nothing else: no separate helper, no separate env file. Read from the node's own sftp-server
log (a real OpenSSH sshd on loopback as the node), while the real agent runs from that zip."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.agent_bundle import agent_zip
from mvp_tui.ssh import load_identity
from tests.peers import require_executable
from tests.ssh.conftest import SshHarness
from tests.ssh.sshd import SSHD_FIX, Sshd, sshd_executable, write_key

SFTP_SERVERS = [
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/libexec/sftp-server",
    "/usr/lib/ssh/sftp-server",
]
# sftp-server -l INFO: `open "/path" flags WRITE,CREATE,TRUNCATE mode 0600`
_OPEN = re.compile(r'open "(?P<path>[^"]+)" flags (?P<flags>\S+)')


def _written(log: Path) -> list[str]:
    found = []
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    for line in text.splitlines():
        match = _OPEN.search(line)
        if match and "WRITE" in match["flags"]:
            found.append(match["path"])
    return found


@pytest.fixture
async def logged_sshd(tmp_path: Path) -> AsyncIterator[tuple[SshHarness, Path]]:
    """An sshd whose sftp subsystem logs every file it opens to tmp_path/sftp.log."""
    server = require_executable("sftp-server", SFTP_SERVERS, SSHD_FIX)
    sshd = Sshd(sshd_executable(), tmp_path / "sshd", sftp=False)
    log = tmp_path / "sftp.log"
    sshd.options = ["-o", f"Subsystem=sftp {server} -e -l INFO 2>>{log}"]
    key = write_key(tmp_path / "id_ed25519", asyncssh.generate_private_key("ssh-ed25519"))
    identity = await load_identity(key, use_env_agent=False)
    sshd.authorize(identity.public_openssh)
    await sshd.start()
    try:
        yield SshHarness(sshd, identity, tmp_path / "node" / "run-1"), log
    finally:
        await sshd.stop()


async def test_one_bring_up_uploads_the_zipapp_and_its_launcher_only(
    logged_sshd: tuple[SshHarness, Path],
) -> None:
    harness, log = logged_sshd
    session = harness.session()
    # A config the agent refuses: it reports and exits at once, through the zip's reader.
    env = {"MVP_RUN_ID": "r-0000abcd", "MVP_LOGICAL_NODE_ID": "1", "MVP_ENGINE_PORT": "eighty"}
    try:
        await session.start_agent(agent_zip(), env, str(harness.remote_dir))
        await harness.wait_for(
            lambda: any(r.get("phase") == "config" and r.get("status") == "failed"
                        for r in harness.agent_records()),
            within=30.0,
        )
    finally:
        await session.close()
    written = _written(log)
    assert sorted(Path(p).name for p in written) == ["agent.pyz", "run.sh"], written
    assert {Path(p).parent for p in written} == {harness.remote_dir}
    assert (harness.remote_dir / "agent.pyz").read_bytes() == agent_zip().read_bytes()
    assert "MVP_ENGINE_PORT='eighty'" in (harness.remote_dir / "run.sh").read_text()

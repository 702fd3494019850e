"""`[ssh] debug` (the seed's `ssh -v`): asyncssh's debug log goes to the run's directory,
private and redacted, and stops with the run."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

from mvp_tui.providers.base import SshEndpoint
from mvp_tui.secrets import Redactor
from mvp_tui.ssh import MemoryPins, SshIdentity
from mvp_tui.ssh.connect import open_connection
from mvp_tui.ssh.debug_log import DEBUG_LOG_FILE, start_debug_log
from tests.ssh.conftest import FAST
from tests.ssh.sshd import Sshd


async def test_the_debug_log_holds_the_handshake_redacted_and_private(
    sshd: Sshd, identity: SshIdentity, tmp_path: Path
) -> None:
    secret = "hf_" + "s" * 30
    stop = start_debug_log(tmp_path / "run", Redactor([secret]))
    try:
        endpoint = SshEndpoint(host="127.0.0.1", port=sshd.port, user="root", via="direct")
        conn, _ = await open_connection(endpoint, identity, MemoryPins(), "vastai:1", FAST)
        logging.getLogger("asyncssh").debug("a line holding %s", secret)
        conn.close()
        await conn.wait_closed()
    finally:
        stop()
    path = tmp_path / "run" / DEBUG_LOG_FILE
    text = path.read_text()
    assert f"port {sshd.port}" in text and "auth" in text.lower(), text[:2000]
    assert secret not in text and "a line holding <redacted>" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    logging.getLogger("asyncssh").debug("after the run")
    assert "after the run" not in path.read_text(), "stopped with the run"
    assert logging.getLogger("asyncssh").propagate, "the logger is put back"

"""`mvp-tui rehearse` with the network really off: the process runs in a network namespace of
its own that has only loopback (`unshare -n`), in a real terminal, driven by keys as a new
user would: tokens arrive, quit destroys everything, exit 0, nothing left running."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

from tests.faults.pty_dashboard import PtyDashboard
from tests.peers import missing_peer
from tests.prompt.engine import require_engine
from tests.ssh.sshd import processes_mentioning

UNSHARE_FIX = "run as root with util-linux (unshare) and iproute2 (ip) installed"
# A new network namespace holds only a loopback device, down: bring it up, then run.
NO_NETWORK = ("unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"')


def offline_wrapper() -> tuple[str, ...]:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        missing_peer("network namespace", "needs root, unshare and ip", UNSHARE_FIX)
    return NO_NETWORK


async def test_the_rehearsal_reaches_tokens_with_the_network_off(tmp_path: Path) -> None:
    require_engine()
    wrapper = offline_wrapper()
    home = tmp_path / "home"  # a new user: no config, no keys, no model
    env = {"HOME": str(home), "MVP_STATE_DIR": str(home / "state"),
           "MVP_PROMPT_RPC_BIND": "127.0.0.1:0"}
    began = time.monotonic()
    term = PtyDashboard(env, cols=160, rows=48, argv=("-m", "mvp_tui", "rehearse"),
                        wrapper=wrapper)
    try:
        await asyncio.to_thread(term.wait_for, "REHEARSAL")
        await asyncio.to_thread(term.wait_for, "RTX 3090")
        term.press(b"\r")  # the cheapest offer: the marketplace is simulated, nothing bills
        await asyncio.to_thread(term.wait_for, "ask the model", 60)
        term.press(b"hello\r")
        await asyncio.to_thread(term.wait_for, "tok/s ·", 30)  # the answer's figures
        term.press(b"\x03")  # ctrl+c asks first
        await asyncio.to_thread(term.wait_for, "Destroy and quit")
        term.press(b"\r")
        code = await asyncio.to_thread(term.proc.wait, 30)
    finally:
        term.kill()
    assert code == 0
    assert time.monotonic() - began < 60
    assert processes_mentioning(str(home)) == []  # no agent, no engine left behind

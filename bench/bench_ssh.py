"""NodeSession's bootstrap cost: from a listening sshd to the first node line delivered.

Against a real OpenSSH sshd on 127.0.0.1, in the same run and alternating:
- raw: asyncssh connect + exec `python3 agent.py` in a prepared directory, first stdout line;
- session: NodeSession.start_agent (pinned host key, SFTP upload of the agent's zipapp and
  its launcher with the env, detached launch, the zip's log reader) until its first
  `on_node_line` call.
Prints the medians of N runs each and their ratio (target < 1.2x).

Run: .venv/bin/python bench/bench_ssh.py [--runs 15]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import asyncssh

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.smoke import add_smoke  # noqa: E402
from mvp_tui.providers.base import SshEndpoint  # noqa: E402
from mvp_tui.ssh import (  # noqa: E402
    MemoryPins,
    NodeSession,
    SshIdentity,
    SshSettings,
    load_identity,
)
from tests.ssh.sshd import Sshd, write_key  # noqa: E402
from tests.ssh.standin_zip import standin_zip  # noqa: E402

AGENT = """\
import sys
print("first line", flush=True)
sys.stdin.readline()
"""


async def raw_first_line(port: int, key: asyncssh.SSHKey, workdir: Path) -> float:
    started = time.perf_counter()
    async with asyncssh.connect(
        "127.0.0.1", port, username="root", client_keys=[key], known_hosts=None, config=None
    ) as conn:
        process = await conn.create_process(f"cd {workdir} && exec python3 agent.py")
        await process.stdout.readline()
        elapsed = time.perf_counter() - started
        process.close()
    return elapsed


async def session_first_line(
    sshd: Sshd, identity: SshIdentity, agent: Path, remote_dir: Path, run: int
) -> float:
    first = asyncio.Event()
    session = NodeSession(
        SshEndpoint(host="127.0.0.1", port=sshd.port, user="root", via="direct"),
        identity,
        MemoryPins(),
        f"bench:{run}",
        SshSettings(),
        lambda event: None,
        lambda kind, line: first.set(),
        lambda text: None,
    )
    started = time.perf_counter()
    await session.start_agent(agent, {"MVP_RUN_ID": f"bench-{run}"}, str(remote_dir))
    await first.wait()
    elapsed = time.perf_counter() - started
    await session.close()
    return elapsed


async def measure(tmp: Path, runs: int) -> tuple[list[float], list[float]]:
    """(raw, session) seconds to the first line, `runs` each, alternating who goes first."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    identity = await load_identity(write_key(tmp / "id_ed25519", key), use_env_agent=False)
    sshd = Sshd(shutil.which("sshd") or "/usr/sbin/sshd", tmp / "sshd")
    sshd.authorize(identity.public_openssh)
    # The agent zipped as a node gets it: its reader (`agent.pyz follow`) in the same file.
    agent, raw_dir = standin_zip(tmp / "agent.py"), tmp / "raw"
    await sshd.start()
    raw: list[float] = []
    ours: list[float] = []
    try:
        await raw_first_line(sshd.port, key, raw_dir)  # warm caches once, not counted
        for run in range(runs):
            node_dir = tmp / "node" / str(run)
            if run % 2:  # alternate who goes first, so drift hits both alike
                ours.append(await session_first_line(sshd, identity, agent, node_dir, run))
                raw.append(await raw_first_line(sshd.port, key, raw_dir))
            else:
                raw.append(await raw_first_line(sshd.port, key, raw_dir))
                ours.append(await session_first_line(sshd, identity, agent, node_dir, run))
    finally:
        await sshd.stop()
    return raw, ours


def main(runs: int) -> None:
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation dir
    with tempfile.TemporaryDirectory(prefix="bench-ssh-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "agent.py").write_text(AGENT)
        (tmp / "raw").mkdir()
        (tmp / "raw" / "agent.py").write_text(AGENT)
        raw, ours = asyncio.run(measure(tmp, runs))
    raw_median, ours_median = statistics.median(raw), statistics.median(ours)
    print(f"runs: {runs} each, alternating, against OpenSSH sshd on 127.0.0.1")
    print(f"raw asyncssh connect+exec, first line   median {raw_median * 1000:7.1f} ms")
    print(f"NodeSession.start_agent, first line     median {ours_median * 1000:7.1f} ms")
    print(f"ratio session/raw: {ours_median / raw_median:.2f}x (target < 1.2x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    add_smoke(parser)
    args = parser.parse_args()
    main(1 if args.smoke else args.runs)

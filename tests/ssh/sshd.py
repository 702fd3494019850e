"""A real OpenSSH sshd on 127.0.0.1 for the SSH tests: start, crash, restart, rekey.

sshd runs with `-f /dev/null` (compiled defaults: pubkey auth, root login by key, TCP
forwarding on) and `StrictModes=no` (keys live under tmp_path). Readiness is its own log line
"Server listening on ...", never a sleep. A crash kills the listener and every per-connection
sshd, like a node whose sshd dies; processes started through it (the detached agent) live on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path

import asyncssh

from mvp_tui.providers.vastai.host_key import SSH_DIR_ENV, SSHD_PIDFILE_ENV
from tests.peers import require_executable

# The test sshds running now, by port: a fake provider's "container" finds its node here.
RUNNING: dict[int, Sshd] = {}
SSHD_FIX = "apt-get install -y openssh-server (CI: see .ci), then mkdir -p /run/sshd"
START_TIMEOUT = 10.0


def sshd_executable() -> str:
    path = require_executable("sshd", ["/usr/sbin/sshd", "sshd"], SSHD_FIX)
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation dir
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_key(path: Path, key: asyncssh.SSHKey) -> Path:
    """A private key file with mode 600 (sshd refuses anything looser)."""
    key.write_private_key(str(path))
    path.chmod(0o600)
    return path


def children(pid: int) -> list[int]:
    """Every live descendant of `pid`, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text`."""
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and text.encode() in cmdline(int(p.name)) and running(int(p.name))
    ]


def processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is `directory` (agent, its parent, readers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == str(directory) and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Whether `pid` is alive and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class Sshd:
    """One sshd on a fixed loopback port, restartable with the same or a new host key."""

    def __init__(self, exe: str, workdir: Path, *, sftp: bool = True) -> None:
        self.exe = exe
        self.sftp = sftp
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        # Named as on a node, so a rotation over SSH finds it (MVP_BOOT_SSH_DIR = self.dir).
        self.host_key_path = write_key(self.dir / "ssh_host_ed25519_key", self.host_key)
        self.pidfile = self.dir / "sshd.pid"  # written at start, as sshd's own PidFile would
        self.authorized = self.dir / "authorized_keys"
        self.authorized.write_text("")
        self.process: asyncio.subprocess.Process | None = None
        self.options: list[str] = []  # extra sshd arguments for the next start
        self.log: list[str] = []
        self._drain: asyncio.Task[None] | None = None

    def authorize(self, public_openssh: str) -> None:
        with self.authorized.open("a") as out:
            out.write(public_openssh.strip() + "\n")

    def adopt_host_key(self, private_openssh: bytes) -> None:
        """Serve this host key from now on, as a node's start command does with the one
        pinned before create: the key file replaced, then SIGHUP (sshd re-execs and reloads
        its keys; a connection in that instant is refused and retried)."""
        key = asyncssh.import_private_key(private_openssh)
        tmp = self.host_key_path.with_suffix(".new")
        write_key(tmp, key)
        tmp.replace(self.host_key_path)
        self.host_key = key
        if self.process is not None and self.process.returncode is None:
            os.kill(self.process.pid, signal.SIGHUP)  # callable from a fake server's thread

    def rekey(self) -> None:
        """A new host key for the next start (a rebuilt node, or an interceptor)."""
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        write_key(self.host_key_path, self.host_key)

    def boot_config(self, authorized_keys: Path) -> Path:
        """An sshd_config for a boot command: this sshd's port and options, keys from
        `authorized_keys`, no host key (the boot command names its own)."""
        config = self.dir / "boot_sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nAuthorizedKeysFile {authorized_keys}\n"
            "PidFile none\nStrictModes no\n"
            + ("Subsystem sftp internal-sftp\n" if self.sftp else "")
        )
        return config

    @property
    def fingerprint(self) -> str:
        return self.host_key.get_fingerprint("sha256")

    def served_key(self) -> asyncssh.SSHKey:
        """The key in sshd's key file now (a rotation over SSH replaces it on disk)."""
        return asyncssh.read_private_key(str(self.host_key_path))

    def rotation_env(self) -> dict[str, str]:
        """The engine's pointers to this sshd's key and pid, for a Vast host key rotation."""
        return {SSH_DIR_ENV: str(self.dir), SSHD_PIDFILE_ENV: str(self.pidfile)}

    async def start(
        self, boot: Sequence[str] | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        """Start sshd; with `boot`, through that command (a pod's start command that ends by
        exec'ing sshd with `-f` from MVP_BOOT_SSHD_CONFIG, see `boot_config`)."""
        assert self.process is None, "sshd already running"
        argv = list(boot) if boot else [
            self.exe, "-D", "-e", "-f", "/dev/null", "-p", str(self.port),
            "-h", str(self.host_key_path), "-o", "ListenAddress=127.0.0.1",
            "-o", f"AuthorizedKeysFile={self.authorized}", "-o", "PidFile=none",
            "-o", "StrictModes=no", *(["-o", "Subsystem=sftp internal-sftp"] if self.sftp else []),
            *self.options,
        ]
        self.process = await asyncio.create_subprocess_exec(
            *argv,
            env=None if env is None else dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self.pidfile.write_text(f"{self.process.pid}\n")
        listening = asyncio.get_running_loop().create_future()
        self._drain = asyncio.create_task(self._read_log(self.process, listening))
        RUNNING[self.port] = self
        try:
            await asyncio.wait_for(asyncio.shield(listening), START_TIMEOUT)
        except TimeoutError:
            await self.stop()
            raise RuntimeError(f"sshd did not start: {self.log[-5:]}") from None

    async def _read_log(
        self, process: asyncio.subprocess.Process, listening: asyncio.Future[None]
    ) -> None:
        assert process.stderr is not None
        async for raw in process.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            self.log.append(line)
            if "Server listening on" in line and not listening.done():
                listening.set_result(None)
        if not listening.done():
            listening.set_exception(RuntimeError(f"sshd exited: {self.log[-5:]}"))

    async def crash(self) -> None:
        """SIGKILL the listener and every per-connection sshd: connections drop at once."""
        await self._kill(signal.SIGKILL)

    async def stop(self) -> None:
        await self._kill(signal.SIGTERM)

    async def _kill(self, sig: signal.Signals) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if RUNNING.get(self.port) is self:
            del RUNNING[self.port]
        sessions = [pid for pid in children(process.pid) if comm(pid) == "sshd"]
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await process.wait()
        if self._drain is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain
            self._drain = None

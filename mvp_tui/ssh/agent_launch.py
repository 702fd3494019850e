"""Put the node agent on the node and build the commands that start, follow and stop it.

Over SFTP the run directory receives two files, both mode 600: the agent (its zipapp,
`mvp_tui/agent_bundle.py`, as `agent.pyz`), which also holds the node's log reader and
stopper (`agent.pyz follow|stop`, mvp_tui/node/follow.py), and its launcher `run.sh`, which
carries the agent's env, so env values never appear on a command line (sshd drops `env=` by
default, and a command line is visible to every user of the node).
The commands only name the directory, positions and timings, each shell-quoted, and run
under `sh -c` whatever the user's login shell is.

`run.sh` is the agent's parent on the node: started detached (setsid, SIGHUP ignored), it
exports the env, runs `python3 agent.pyz` with stdin on the control fifo (opened read-write,
so the agent never sees EOF between writers) and stdout/stderr appended to log files, records
the agent's pid, waits, and records its exit code. The reader (`agent.pyz follow`) starts at
the same time, so the two Python start-ups overlap. `sh run.sh --exec CMD` runs CMD with the
agent's env instead (`[vastai] bootstrap_command`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import asyncssh

from mvp_tui.node import follow
from mvp_tui.node_protocol import AgentEnv
from mvp_tui.ssh.errors import AgentFileError
from mvp_tui.ssh.logtail import LogPositions
from mvp_tui.ssh.settings import SshSettings

AGENT_NAME = "agent.pyz"  # the same name whatever build: a re-attach finds the running one
RUN_NAME = "run.sh"
EXEC_FLAG = "--exec"  # `sh run.sh --exec CMD`: CMD with the agent's env
_PYTHON_ENV = AgentEnv.env_name("node_python")

_ENV_MARK = "@ENV@\n"  # where the agent's env goes, one `KEY='value'` line each
RUN_SH = f"""\
#!/bin/sh
# mvp-tui: the node agent's parent and its env (mode 600). Usage (in the run directory):
#   sh run.sh AGENT          start the agent, recording its pid and exit code
#   sh run.sh {EXEC_FLAG} CMD      run CMD with the agent's env
set -a
{_ENV_MARK}set +a
if [ "$1" = {EXEC_FLAG} ]; then exec sh -c "$2"; fi
record() {{ echo "$2" > "$1.tmp" && mv -f "$1.tmp" "$1"; }}
trap '' HUP
record {follow.WRAPPER_PID} $$
[ -p {follow.CONTROL} ] || mkfifo -m 600 {follow.CONTROL}
"${{{_PYTHON_ENV}:-python3}}" "$1" <> {follow.CONTROL} \\
    >> {follow.STDOUT_LOG} 2>> {follow.STDERR_LOG} &
agent=$!
record {follow.AGENT_PID} $agent
wait $agent
record {follow.EXIT_CODE} $?
"""

# $1 run dir, $2 agent file name, then the reader's arguments. The channel opens while the
# files are uploaded and waits for a `go` line on stdin (sent once they are in place), so
# the node's session start-up overlaps the upload. The agent then starts detached (its own
# session when setsid exists) while the reader starts: their start-ups overlap too. The
# reader runs with `python3 -S`: it needs the standard library only, and skipping
# site-packages cuts its start-up.
GO_LINE = b"go\n"
_LAUNCH_AND_FOLLOW = f"""\
read go && [ "$go" = go ] || exit 4
cd "$1" || exit 3
command -v python3 >/dev/null 2>&1 || {{
  echo "this image lacks python3 (the node agent needs Python 3.8 or later)" >&2
  exit {follow.EXIT_NO_PYTHON}; }}
rm -f {follow.AGENT_PID} {follow.WRAPPER_PID} {follow.EXIT_CODE}
agent=$2
shift 2
(command -v setsid >/dev/null 2>&1 && exec setsid sh {RUN_NAME} "$agent"
 exec sh {RUN_NAME} "$agent") </dev/null >/dev/null 2>&1 &
exec python3 -S "$agent" follow . "$@"
"""
# A node an older mvp-tui set up holds the reader beside an agent.pyz that knows no `follow`
# (it would start a second agent): a re-attach or a stop uses that reader there.
LEGACY_READER = "mvp_node_helper.py"
_FOLLOW = f"""\
cd "$1" || exit 3
agent=$2
shift 2
[ -f {LEGACY_READER} ] && exec python3 -S {LEGACY_READER} follow . "$@"
exec python3 -S "$agent" follow . "$@"
"""
_STOP = f"""\
agent=$1/$2
[ -f "$1/{LEGACY_READER}" ] && agent=$1/{LEGACY_READER}
exec python3 -S "$agent" stop "$1" "$3"
"""
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class AgentPlan:
    """What to run on the node and where. `env` values are secret-safe: never shown."""

    agent_path: Path
    remote_dir: str
    env: Mapping[str, str] = field(repr=False)

    @property
    def agent_name(self) -> str:
        return AGENT_NAME

    def remote(self, name: str) -> str:
        return str(PurePosixPath(self.remote_dir) / name)


def make_plan(agent_path: str | Path, env: Mapping[str, str], remote_dir: str) -> AgentPlan:
    """Check the inputs here, so a bad one fails before any connection with a clear error."""
    path = Path(agent_path).expanduser()
    if not path.is_file():
        raise AgentFileError(
            f"node agent {path} is not a readable file",
            fix="pass the path of the node agent's zipapp (mvp_tui.agent_bundle.agent_zip())",
        )
    for key, value in env.items():
        if not _ENV_KEY.match(key):
            raise AgentFileError(
                f"node agent env key {key!r} is not a valid variable name",
                fix="use letters, digits and _ only, not starting with a digit (e.g. MVP_RUN_ID)",
            )
        if "\x00" in value:
            raise AgentFileError(
                f"node agent env value of {key} contains a NUL byte",
                fix=f"remove the NUL byte from {key}'s value",
            )
    if not remote_dir or any(c in remote_dir for c in "\x00\n\r"):
        raise AgentFileError(
            f"remote run directory {remote_dir!r} is empty or contains a control character",
            fix="use a plain path such as /root/mvp/<run id>",
        )
    return AgentPlan(agent_path=path, remote_dir=remote_dir, env=dict(env))


class UploadMethod(enum.Enum):
    SFTP = "sftp"
    EXEC = "exec"  # the node's sshd has no sftp subsystem: files go through `cat`


async def upload(conn: asyncssh.SSHClientConnection, plan: AgentPlan) -> UploadMethod:
    """Create the run directory and put the agent and its launcher (with the env) in it.

    SFTP first; a node whose sshd offers no sftp subsystem gets the same files through a
    plain command reading stdin (with umask 077), so no image is left out.
    """
    files = _files(plan)
    await prepare_run_dir(conn, plan)
    try:
        sftp_cm = conn.start_sftp_client()
        async with sftp_cm as sftp:
            await sftp.makedirs(plan.remote_dir, exist_ok=True)
            await asyncio.gather(*(_sftp_write(sftp, plan, n, d) for n, d in files.items()))
        return UploadMethod.SFTP
    except asyncssh.ChannelOpenError:
        pass
    await asyncio.gather(*(_exec_write(conn, plan, n, d) for n, d in files.items()))
    return UploadMethod.EXEC


class RunDirUnsafe(OSError):
    """The node's run directory is not this login's alone: nothing is written into it."""


# The run directory, made (umask 077) and checked before anything is written into it: a
# directory of its own (no symlink), owned by this login, in a parent owned by it or root
# that no one else may write to unless sticky (/tmp is; a /tmp/mvp-node another user made
# first is not), then mode 700. Exit 3 with the reason on stdout: refused.
_PREPARE_DIR = r"""umask 077 && mkdir -p "$1" || exit 1
p=$(dirname "$1")
[ -d "$1" ] && [ ! -L "$1" ] || { echo "is not a directory of its own (a symlink?)"; exit 3; }
[ -O "$1" ] || { echo "is owned by another user"; exit 3; }
[ -O "$p" ] || [ "$(stat -c %u "$p")" = 0 ] || { echo "sits in $p, another user's"; exit 3; }
[ -z "$(find "$p" -maxdepth 0 \( -perm -0002 -o -perm -0020 \) ! -perm -1000)" ] ||
  { echo "sits in $p, which others may write to"; exit 3; }
chmod 700 -- "$1"
"""


async def prepare_run_dir(conn: asyncssh.SSHClientConnection, plan: AgentPlan) -> None:
    """Make the run directory 700 and check whose it is (the security read's L9): another
    user of the node must not read or swap the agent or run.sh, which holds the run's key."""
    command = shlex.join(["sh", "-c", _PREPARE_DIR, "sh", plan.remote_dir])
    done = await conn.run(command, check=False)
    out = str(done.stdout or "").strip()
    if done.exit_status == 3:
        raise RunDirUnsafe(
            f"the node's run directory {plan.remote_dir} {out}: another user of the node could "
            "read or swap the agent and run.sh (which holds the run's key); fix: set "
            "[runtime] node_dir (MVP_NODE_DIR, --node-dir) to a directory only the login user "
            "owns, e.g. /root/mvp-node"
        )
    if done.exit_status != 0:
        err = str(done.stderr or "").strip().splitlines()
        raise RunDirUnsafe(f"cannot make the node's run directory {plan.remote_dir}: "
                           f"{err[-1] if err else f'exit {done.exit_status}'}")


def _files(plan: AgentPlan) -> dict[str, bytes]:
    """What one node receives: the agent's zipapp and its launcher, nothing else."""
    return {
        plan.agent_name: plan.agent_path.read_bytes(),
        RUN_NAME: run_script(plan.env).encode("utf-8"),
    }


def run_script(env: Mapping[str, str]) -> str:
    """`run.sh` for this env."""
    return RUN_SH.replace(_ENV_MARK, env_lines(env), 1)


def env_lines(env: Mapping[str, str]) -> str:
    """The env as `KEY='value'` lines for a shell under `set -a` (keys checked by make_plan)."""
    return "".join(f"{key}={_sh_quote(value)}\n" for key, value in sorted(env.items()))


def _sh_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


async def _sftp_write(sftp: asyncssh.SFTPClient, plan: AgentPlan, name: str, data: bytes) -> None:
    """One file, created with mode 600 (an older copy is removed, not reused)."""
    path = plan.remote(name)
    with contextlib.suppress(asyncssh.SFTPNoSuchFile):
        await sftp.remove(path)
    attrs = asyncssh.SFTPAttrs(permissions=0o600)
    async with sftp.open(path, "wb", attrs=attrs) as out:
        await out.write(data)
    await sftp.chmod(path, 0o600)


_EXEC_WRITE = 'umask 077 && mkdir -p "$1" && cat > "$1/.$2.tmp" && mv -f "$1/.$2.tmp" "$1/$2"'


async def _exec_write(
    conn: asyncssh.SSHClientConnection, plan: AgentPlan, name: str, data: bytes
) -> None:
    command = shlex.join(["sh", "-c", _EXEC_WRITE, "sh", plan.remote_dir, name])
    await conn.run(command, input=data, encoding=None, check=True)


def follow_command(
    plan: AgentPlan,
    positions: LogPositions,
    settings: SshSettings,
    *,
    launch: bool,
    wait_for_pid: bool = True,
) -> str:
    """The node-side reader from `positions`; with `launch`, the agent starts alongside.

    Without `wait_for_pid` the reader gives up at once when no agent was ever started in the
    directory (re-attach after a restart), instead of waiting for a launch in progress.
    """
    script = _LAUNCH_AND_FOLLOW if launch else _FOLLOW
    pid_wait = settings.launch_timeout if launch or wait_for_pid else 0.0
    return shlex.join(
        [
            "sh",
            "-c",
            script,
            "sh",
            plan.remote_dir,
            plan.agent_name,
            str(positions.stdout),
            str(positions.stderr),
            str(settings.poll_interval),
            str(pid_wait),
        ]
    )


def stop_command(plan: AgentPlan, settings: SshSettings) -> str:
    """The node-side stopper (`agent.pyz stop`); it prints one word (see node/follow.py)."""
    return shlex.join(
        ["sh", "-c", _STOP, "sh", plan.remote_dir, plan.agent_name, str(settings.shutdown_grace)]
    )

"""Ship the node agent to the node in the channel that starts it; follow and stop it.

One exec channel does the launch: its command runs a few lines of Python (`BOOT`) that read
the node helper from the channel's stdin and run it; the helper reads the run directory's
files after it (the agent, itself, `run.sh`, and the agent's env as a shell file), writes
each with mode 600, starts the agent detached and streams its logs back on the same channel.
So env values never appear on a command line (sshd drops `env=` by default, and a command
line is visible to every user of the node), the node needs no SFTP subsystem, and nothing
waits on a round trip between opening the channel and the agent starting. The commands only
name the directory, positions, timings and sizes, each shell-quoted.

`run.sh` is the agent's parent on the node: started detached (its own session, SIGHUP
ignored), it sources the env, runs the agent with the helper's interpreter (the `python3` the
login environment names, or MVP_NODE_PYTHON), stdin on the control fifo (opened read-write,
so the agent never sees EOF between writers) and stdout/stderr appended to log files,
records the agent's pid, waits, and records its exit code.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from mvp_tui.ssh import node_helper
from mvp_tui.ssh.errors import AgentFileError
from mvp_tui.ssh.logtail import LogPositions
from mvp_tui.ssh.settings import SshSettings

HELPER_NAME = "mvp_node_helper.py"
RUN_NAME = node_helper.RUN_NAME
ENV_NAME = "agent.env"

RUN_SH = f"""\
#!/bin/sh
# mvp-tui: the node agent's parent, started detached by {HELPER_NAME} launch.
# Usage (in the run directory): sh {RUN_NAME} AGENT [PYTHON]
record() {{ echo "$2" > "$1.tmp" && mv -f "$1.tmp" "$1"; }}
trap '' HUP
[ -p {node_helper.CONTROL} ] || mkfifo -m 600 {node_helper.CONTROL}
set -a
. ./{ENV_NAME}
set +a
"${{MVP_NODE_PYTHON:-${{2:-python3}}}}" "$1" <> {node_helper.CONTROL} \\
    >> {node_helper.STDOUT_LOG} 2>> {node_helper.STDERR_LOG} &
agent=$!
record {node_helper.AGENT_PID} $agent
wait $agent
record {node_helper.EXIT_CODE} $?
"""

# `python3 -S -c BOOT SIZE launch ...`: read SIZE bytes of helper source from stdin and run
# it as the main module with the arguments after SIZE (the rest of stdin is its to read).
# `-S` skips site-packages: the helper needs the standard library only, and starts faster.
BOOT = (
    "import sys;s=sys.stdin.buffer.read(int(sys.argv[1]));sys.argv=sys.argv[1:];"
    "exec(compile(s,'mvp_node_helper.py','exec'),{'__name__':'__main__'})"
)
_FOLLOW = f"""\
cd "$1" || exit 3
shift 2
exec python3 -S {HELPER_NAME} follow . "$@"
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
        return self.agent_path.name

    def remote(self, name: str) -> str:
        return str(PurePosixPath(self.remote_dir) / name)


def make_plan(agent_path: str | Path, env: Mapping[str, str], remote_dir: str) -> AgentPlan:
    """Check the inputs here, so a bad one fails before any connection with a clear error."""
    path = Path(agent_path).expanduser()
    if not path.is_file():
        raise AgentFileError(
            f"node agent {path} is not a readable file",
            fix="pass the path of the node agent script (mvp_tui/node_agent.py)",
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


def launch_stream(plan: AgentPlan) -> bytes:
    """What the launch channel's stdin carries: the helper, then the run directory's files."""
    helper = helper_source()
    files = {
        plan.agent_name: plan.agent_path.read_bytes(),
        HELPER_NAME: helper,
        RUN_NAME: RUN_SH.encode("ascii"),
        ENV_NAME: env_file(plan.env).encode("utf-8"),
    }
    records = [helper]
    for name, data in files.items():
        encoded = name.encode("utf-8")
        records += [node_helper.RECORD.pack(len(encoded), len(data)), encoded, data]
    records.append(node_helper.RECORD.pack(0, 0))
    return b"".join(records)


@functools.cache
def helper_source() -> bytes:
    """The node helper's source, as shipped to the node."""
    return Path(node_helper.__file__).read_bytes()


def env_file(env: Mapping[str, str]) -> str:
    """The env as `KEY='value'` lines for `set -a; . ./agent.env` (keys checked by make_plan)."""
    return "".join(f"{key}={_sh_quote(value)}\n" for key, value in sorted(env.items()))


def _sh_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def follow_command(
    plan: AgentPlan,
    positions: LogPositions,
    settings: SshSettings,
    *,
    launch: bool,
    wait_for_pid: bool = True,
) -> str:
    """The node-side reader from `positions`; with `launch`, the agent starts first (its
    files, `launch_stream(plan)`, go to the channel's stdin).

    Without `wait_for_pid` the reader gives up at once when no agent was ever started in the
    directory (re-attach after a restart), instead of waiting for a launch in progress.
    """
    pid_wait = settings.launch_timeout if launch or wait_for_pid else 0.0
    reader_args = [
        str(positions.stdout),
        str(positions.stderr),
        str(settings.poll_interval),
        str(pid_wait),
    ]
    if launch:
        size = str(len(helper_source()))
        return shlex.join(
            [
                "python3",
                "-S",
                "-c",
                BOOT,
                size,
                "launch",
                plan.remote_dir,
                plan.agent_name,
                *reader_args,
            ]
        )
    return shlex.join(["sh", "-c", _FOLLOW, "sh", plan.remote_dir, plan.agent_name, *reader_args])


def stop_command(plan: AgentPlan, settings: SshSettings) -> str:
    return shlex.join(
        [
            "python3",
            "-S",
            plan.remote(HELPER_NAME),
            "stop",
            plan.remote_dir,
            str(settings.shutdown_grace),
        ]
    )

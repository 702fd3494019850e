"""A state dir the run cannot write: `up` must not create anything at the provider that it
could not record (a lease nobody knows of bills forever). It stops before the provider hears
anything (no offer search, no SSH key registered, no create) with one line naming the state
dir and the fix, exit 2 (README "Every way out").

Ways that hold for any user: the state dir path is a regular file; its `runs` directory is a
regular file; no file may grow past 256 bytes (the child's RLIMIT_FSIZE: room for a few bytes,
not for the records, a nearly full disk as far as the run can tell).
As root, where permission bits do not bind: the state dir is a read-only bind mount, an
immutable directory (`chattr +i`), or a tmpfs filled to its last byte (ENOSPC); the mounts are
made in the run's own mount namespace (`unshare --mount`), so nothing outlives it. Those need
CAP_SYS_ADMIN (mounts) or CAP_LINUX_IMMUTABLE (chattr), and are skipped, saying which, where
root lacks them. As a normal user: the permission-bits variant (chmod 0o500).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import Run, Verdict

ARGS = ["--yes", "--until", "leased"]
ROOT = os.geteuid() == 0
# Run in a private mount namespace: the shell mounts over "$0" (the state dir), then execs
# the run; the mount ends with the namespace.
READ_ONLY_BIND = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
FULL_TMPFS = (
    'mount -t tmpfs -o size=64k,mode=0700 tmpfs "$0" && mkdir "$0/runs"'
    ' && { head -c 1048576 /dev/zero > "$0/filler" 2>/dev/null; [ -s "$0/filler" ]; }'
    ' && exec "$@"'
)


def _regular_file(state: Path) -> tuple[str, ...]:
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("not a directory\n")
    return ()


def _runs_is_a_file(state: Path) -> tuple[str, ...]:
    state.mkdir(parents=True)
    (state / "runs").write_text("not a directory\n")
    return ()


def _read_only(state: Path) -> tuple[str, ...]:
    state.mkdir(parents=True)
    state.chmod(0o500)  # tmp_path's cleanup makes it writable again
    return ()


def _file_size_limit(state: Path) -> tuple[str, ...]:
    return ()  # the run's file writes fail past 256 bytes (Run(disk_full=True))


def _namespace(script: str) -> Callable[[Path], tuple[str, ...]]:
    def setup(state: Path) -> tuple[str, ...]:
        state.mkdir(parents=True)
        return ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(state))

    return setup


def _immutable(state: Path) -> tuple[str, ...]:
    state.mkdir(parents=True)
    subprocess.run(["chattr", "+i", str(state)], check=True, capture_output=True)
    return ()


def _can(command: list[str]) -> bool:
    if shutil.which(command[0]) is None:
        return False
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


def _can_mount() -> bool:
    return ROOT and _can(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                          'mount -t tmpfs -o size=4k tmpfs /mnt'])


def _can_chattr(where: Path) -> bool:
    where.mkdir()
    try:
        return ROOT and _can(["chattr", "+i", str(where)])
    finally:
        subprocess.run(["chattr", "-i", str(where)], capture_output=True, check=False)


SETUPS: dict[str, Callable[[Path], tuple[str, ...]]] = {
    "state-dir-is-a-file": _regular_file,
    "runs-dir-is-a-file": _runs_is_a_file,
    "file-size-limit-256-bytes": _file_size_limit,
}
# Root ignores permission bits (CI runs as root): there the root variants stand for it.
if ROOT:
    SETUPS["read-only-bind-mount-as-root"] = _namespace(READ_ONLY_BIND)
    SETUPS["immutable-dir-as-root"] = _immutable
    SETUPS["full-tmpfs-as-root"] = _namespace(FULL_TMPFS)
else:
    SETUPS["read-only-chmod-500"] = _read_only


@pytest.fixture
def unimmutable(state: Path) -> Iterator[None]:
    """Whatever the case did, the state dir can be removed afterwards."""
    yield
    subprocess.run(["chattr", "-i", str(state)], capture_output=True, check=False)


@pytest.mark.parametrize("setup", list(SETUPS))
async def test_an_unwritable_state_dir_exits_2_before_the_provider_hears_anything(
    setup: str,
    fake: FakeVast,
    env: dict[str, str],
    state: Path,
    verdict: Verdict,
    tmp_path: Path,
    unimmutable: None,
) -> None:
    mounts = setup.endswith("mount-as-root") or setup.startswith("full-tmpfs")
    if mounts and not _can_mount():
        pytest.skip("root here may not mount (no CAP_SYS_ADMIN): the bind and tmpfs cases")
    if setup.startswith("immutable") and not _can_chattr(tmp_path / "chattr-check"):
        pytest.skip("root here may not set the immutable flag (no CAP_LINUX_IMMUTABLE)")
    wrapper = SETUPS[setup](state)
    disk_full = setup.startswith("file-size-limit")
    async with Run(ARGS, state, env, disk_full=disk_full, wrapper=wrapper) as run:
        code = await run.ended(within=60, after="a start on an unwritable state dir")
    verdict.exit_code(code, run.stderr, expected=2, what=f"up with {setup}")
    # Nothing reached the provider: no search, no SSH key registered, no create.
    assert [(r.method, r.path) for r in fake.requests] == []
    assert fake.instances() == []
    verdict.nothing_bills(fake, state)
    lines = [line for line in run.stderr.splitlines() if str(state) in line]
    assert lines, f"no stderr line names the state dir {state}: {run.stderr!r}"
    assert "MVP_STATE_DIR" in lines[0] and "nothing was rented" in lines[0], lines[0]

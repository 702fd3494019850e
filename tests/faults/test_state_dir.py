"""A state dir the run cannot write: `up` must not create anything at the provider that it
could not record (a lease nobody knows of bills forever). It stops before the create with
one line naming the state dir, exit 2 (or 1), and the provider holds nothing.

Ways that hold as root too (root ignores permission bits): the state dir path is a regular
file; its `runs` directory is a regular file; every file write fails with EFBIG (the child's
RLIMIT_FSIZE is 0, a full disk as far as the run can tell). The permission-bits variant
(chmod 0o500) runs only as a normal user, where it binds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import Run, Verdict

ARGS = ["--yes", "--until", "leased"]


def _regular_file(state: Path) -> None:
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("not a directory\n")


def _runs_is_a_file(state: Path) -> None:
    state.mkdir(parents=True)
    (state / "runs").write_text("not a directory\n")


def _read_only(state: Path) -> None:
    state.mkdir(parents=True)
    state.chmod(0o500)  # tmp_path's cleanup makes it writable again


def _full(state: Path) -> None:
    return None  # the run's file writes fail (Run(disk_full=True))


SETUPS = {
    "state-dir-is-a-file": _regular_file,
    "runs-dir-is-a-file": _runs_is_a_file,
    "disk-full": _full,
}
# Root ignores permission bits (CI runs as root): there the other variants stand for it.
if os.geteuid() != 0:
    SETUPS["read-only-chmod-500"] = _read_only


@pytest.mark.parametrize("setup", list(SETUPS))
async def test_an_unwritable_state_dir_creates_nothing_at_the_provider(
    setup: str, fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    SETUPS[setup](state)
    async with Run(ARGS, state, env, disk_full=setup == "disk-full") as run:
        code = await run.ended(within=60, after="a start on an unwritable state dir")
    verdict.exit_code(code, run.stderr, expected=(2, 1), what=f"up with {setup}")
    creates = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
    assert creates == [], "a create was sent that the run could not record"
    verdict.nothing_bills(fake, state)
    lines = [line for line in run.stderr.splitlines() if str(state) in line]
    assert lines, f"no stderr line names the state dir {state}: {run.stderr!r}"

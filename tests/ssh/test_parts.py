"""The session's parts on their own: back-off, settings, line assembly, the launcher's env,
plans."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mvp_tui.ssh import AgentFileError, AttemptOutcome, Phase, SshAttempt, SshSettings
from mvp_tui.ssh.agent_launch import follow_command, make_plan, run_script, upload
from mvp_tui.ssh.backoff import Backoff
from mvp_tui.ssh.logtail import LineAssembler, LogPositions
from tests.ssh.conftest import STANDIN, SshHarness
from tests.ssh.sshd import Sshd


def test_backoff_doubles_from_one_second_to_a_thirty_second_cap() -> None:
    backoff = Backoff()
    assert [backoff.next_delay() for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]
    backoff.reset()
    assert backoff.next_delay() == 1


def test_settings_refuse_nonsense_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="ready_timeout must be > 0"):
        SshSettings(ready_timeout=0)
    with pytest.raises(ValueError, match="backoff_factor must be >= 1"):
        SshSettings(backoff_factor=0.5)
    with pytest.raises(ValueError, match="auth_attempts must be >= 1"):
        SshSettings(auth_attempts=0)


def collect(into: list[tuple[str, bytes]]):  # type: ignore[no-untyped-def]
    def deliver(kind: str, line: bytes) -> None:
        into.append((kind, line))

    return deliver


def test_partial_lines_are_held_and_positions_count_delivered_bytes() -> None:
    lines: list[tuple[str, bytes]] = []
    out = LineAssembler("stdout", 100, max_line=1024)
    out.feed(b"line 1\nli", collect(lines))
    assert lines == [("stdout", b"line 1")] and out.position == 107
    out.feed(b"ne 2", collect(lines))
    assert len(lines) == 1 and out.position == 107  # held, not delivered
    out.feed(b"\n\n", collect(lines))
    assert lines[1:] == [("stdout", b"line 2"), ("stdout", b"")] and out.position == 115
    out.feed(b"tail", collect(lines))
    out.discard_partial()  # a drop: the held bytes are read again from the position
    assert out.position == 115
    out.feed(b"tail without newline", collect(lines))
    out.flush(collect(lines))
    assert lines[-1] == ("stdout", b"tail without newline") and out.position == 135


def test_an_overlong_line_comes_in_bounded_pieces() -> None:
    lines: list[tuple[str, bytes]] = []
    err = LineAssembler("stderr", 0, max_line=4)
    err.feed(b"abcdefghij\nxy\n", collect(lines))
    assert [line for _, line in lines] == [b"abcd", b"efgh", b"ij", b"xy"]
    assert err.position == 14


def test_a_failing_callback_leaves_the_line_undelivered() -> None:
    out = LineAssembler("stdout", 0, max_line=64)

    def broken(kind: str, line: bytes) -> None:
        raise RuntimeError("ui gone")

    with pytest.raises(RuntimeError):
        out.feed(b"one\n", broken)
    assert out.position == 0
    lines: list[tuple[str, bytes]] = []
    out.feed(b"", collect(lines))
    assert lines == [("stdout", b"one")] and out.position == 4


def test_the_launchers_env_survives_any_value_through_a_real_shell(tmp_path: Path) -> None:
    env = {
        "MVP_PLAIN": "abc",
        "MVP_QUOTES": "it's \"quoted\" and 'twice'",
        "MVP_SHELL": "$(touch pwned) `touch pwned` ${HOME} ; rm -rf /nope",
        "MVP_NEWLINE": "two\nlines",
        "MVP_EMPTY": "",
    }
    (tmp_path / "run.sh").write_text(run_script(env))
    out = subprocess.run(
        ["sh", "run.sh", "--exec", "env -0"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    seen = dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)
    assert {k: seen[k] for k in env} == env
    assert not (tmp_path / "pwned").exists()


def test_plans_check_their_inputs_before_any_connection(tmp_path: Path) -> None:
    with pytest.raises(AgentFileError, match="not a readable file"):
        make_plan(tmp_path / "missing.py", {}, "/root/mvp")
    with pytest.raises(AgentFileError, match="'BAD-KEY' is not a valid variable name"):
        make_plan(STANDIN, {"BAD-KEY": "x"}, "/root/mvp")
    with pytest.raises(AgentFileError, match="NUL"):
        make_plan(STANDIN, {"MVP_X": "a\0b"}, "/root/mvp")
    with pytest.raises(AgentFileError, match="control character"):
        make_plan(STANDIN, {}, "/root/mvp\nrm")
    plan = make_plan(STANDIN, {"MVP_TOKEN": "s3cret-value"}, "/root/mvp/r 1")
    assert "s3cret-value" not in repr(plan)
    command = follow_command(plan, LogPositions(10, 20), SshSettings(), launch=True)
    assert "s3cret-value" not in command and "'/root/mvp/r 1'" in command


def test_events_are_json_with_named_outcomes() -> None:
    event = SshAttempt(
        lease_key="vastai:1",
        attempt=2,
        target="1.2.3.4:22",
        outcome=AttemptOutcome.NOT_LISTENING,
        next_try_s=2.0,
    )
    assert event.to_dict() == {
        "event": "ssh_attempt",
        "at": 0.0,
        "lease_key": "vastai:1",
        "attempt": 2,
        "target": "1.2.3.4:22",
        "outcome": "not_listening",
        "detail": "",
        "next_try_s": 2.0,
        "phase": Phase.BOOTSTRAP.value,
    }


async def test_a_node_without_sftp_gets_the_files_through_a_command(
    sshd_exe: str, tmp_path: Path, harness: SshHarness
) -> None:
    bare = Sshd(sshd_exe, tmp_path / "bare-sshd", sftp=False)  # the brief's exact recipe
    bare.authorize(harness.identity.public_openssh)
    await bare.start()
    try:
        harness.sshd = bare
        session = harness.session()
        env = {"STANDIN_LINES": "3", "MVP_TOKEN": "s3cret"}
        pid = await session.start_agent(STANDIN, env, str(harness.remote_dir))
        assert pid > 0
        await harness.wait_for(lambda: "line 3" in harness.stdout())
        assert (harness.remote_dir / "run.sh").stat().st_mode & 0o777 == 0o600
        assert (harness.remote_dir / "agent.pyz").read_bytes() == STANDIN.read_bytes()
        assert any("no sftp subsystem" in line for line in harness.provider_lines)
        await session.close()
    finally:
        await bare.stop()


async def test_upload_reports_which_way_it_went(sshd: Sshd, harness: SshHarness) -> None:
    from mvp_tui.ssh.agent_launch import UploadMethod
    from mvp_tui.ssh.connect import open_connection

    conn, _ = await open_connection(
        harness.endpoint, harness.identity, harness.pins, "vastai:1", SshSettings()
    )
    try:
        plan = make_plan(STANDIN, {}, str(harness.remote_dir))
        assert await upload(conn, plan) is UploadMethod.SFTP
    finally:
        conn.close()
        await conn.wait_closed()


async def _upload_to(harness: SshHarness, remote_dir: Path) -> None:
    from mvp_tui.ssh.agent_launch import upload
    from mvp_tui.ssh.connect import open_connection

    conn, _ = await open_connection(
        harness.endpoint, harness.identity, harness.pins, "vastai:1", SshSettings()
    )
    try:
        await upload(conn, make_plan(STANDIN, {"MVP_API_KEY": "k" * 24}, str(remote_dir)))
    finally:
        conn.close()
        await conn.wait_closed()


async def test_the_run_dir_is_made_700_even_where_it_was_left_open(
    sshd: Sshd, harness: SshHarness, tmp_path: Path
) -> None:
    run_dir = tmp_path / "nodes" / "r-1"
    run_dir.mkdir(parents=True)
    run_dir.chmod(0o777)
    await _upload_to(harness, run_dir)
    assert run_dir.stat().st_mode & 0o777 == 0o700
    assert (run_dir / "run.sh").stat().st_mode & 0o777 == 0o600


NOBODY = 65534


@pytest.mark.parametrize("case", ["owned", "symlink", "parent-owned", "parent-open"])
async def test_a_run_dir_another_user_could_touch_is_refused_before_any_file(
    sshd: Sshd, harness: SshHarness, tmp_path: Path, case: str
) -> None:
    """(The sshd runs as root here, so another uid's directory is made with chown.)"""
    from mvp_tui.ssh.agent_launch import RunDirUnsafe

    parent = tmp_path / "nodes"
    parent.mkdir()
    run_dir = parent / "r-1"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if case == "owned":
        run_dir.mkdir()
        os.chown(run_dir, NOBODY, NOBODY)
        why = "is owned by another user"
    elif case == "symlink":
        run_dir.symlink_to(elsewhere)
        why = "is not a directory of its own"
    elif case == "parent-owned":
        os.chown(parent, NOBODY, NOBODY)
        why = f"sits in {parent}, another user's"
    else:
        parent.chmod(0o777)
        why = f"sits in {parent}, which others may write to"
    with pytest.raises(RunDirUnsafe) as refused:
        await _upload_to(harness, run_dir)
    text = str(refused.value)
    assert f"the node's run directory {run_dir} {why}" in text and "[runtime] node_dir" in text
    assert "k" * 24 not in text
    for place in (run_dir, elsewhere):
        assert not (place / "run.sh").exists() and not (place / "agent.pyz").exists()


def test_the_ssh_package_never_imports_textual() -> None:
    import sys

    code = "import sys, mvp_tui.ssh; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "older-node"])
def test_the_stopper_is_the_zips_or_an_older_nodes_reader(tmp_path: Path, legacy: bool) -> None:
    """`agent.pyz stop`; on a node an older mvp-tui set up (its reader beside an agent.pyz
    that knows no `stop`) that reader, never a second agent."""
    from mvp_tui.agent_bundle import agent_zip
    from mvp_tui.node import follow
    from mvp_tui.ssh.agent_launch import LEGACY_READER, stop_command

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    if legacy:
        (run_dir / "agent.pyz").write_text("import sys; print('a second agent'); sys.exit(9)\n")
        (run_dir / LEGACY_READER).write_bytes(Path(follow.__file__).read_bytes())
    else:
        (run_dir / "agent.pyz").write_bytes(agent_zip().read_bytes())
    plan = make_plan(run_dir / "agent.pyz", {}, str(run_dir))
    done = subprocess.run(stop_command(plan, SshSettings()), shell=True, capture_output=True,
                          text=True, timeout=30, check=False)
    assert (done.returncode, done.stdout) == (0, "not_started\n"), done.stderr

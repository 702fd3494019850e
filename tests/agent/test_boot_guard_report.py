"""The agent's side of the boot guard (`boot_guard_report`): it reads the verdict
the guard left in their shared directory, then writes the stand-down marker, and says what it
found as one `boot_guard` phase."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.node.switch import boot_guard_report
from mvp_tui.node_protocol import (
    BOOT_GUARD_DIR_ENV,
    BOOT_GUARD_STAND_DOWN_FILE,
    BOOT_GUARD_VERDICT_FILE,
)


def guard_dir(tmp_path: Path, verdict: str | None) -> dict[str, str]:
    directory = tmp_path / "guard"
    directory.mkdir()
    if verdict is not None:
        (directory / BOOT_GUARD_VERDICT_FILE).write_text(verdict + "\n")
    return {BOOT_GUARD_DIR_ENV: str(directory)}


def marker(env: dict[str, str]) -> Path:
    return Path(env[BOOT_GUARD_DIR_ENV]) / BOOT_GUARD_STAND_DOWN_FILE


def test_an_armed_guard_is_stood_down(tmp_path: Path) -> None:
    env = guard_dir(tmp_path, "armed curl 90")
    status, detail = boot_guard_report(env, "runpod")
    assert status == "ready" and detail["state"] == "armed" and detail["stood_down"] is True
    assert (detail["tool"], detail["grace_s"], detail["armed"]) == ("curl", 90, True)
    assert marker(env).is_file()


def test_a_failed_guard_is_reported_with_its_reason(tmp_path: Path) -> None:
    env = guard_dir(tmp_path, "failed no CONTAINER_API_KEY in the container environment")
    status, detail = boot_guard_report(env, "vastai")
    assert status == "failed" and detail["state"] == "failed"
    assert detail["reason"] == (
        "the boot guard cannot run: no CONTAINER_API_KEY in the container environment; use an "
        "image with the instance key and python3 or curl, or set [limits] "
        "require_node_watchdog = false to rent without the node switch"
    )
    assert marker(env).is_file(), "stood down all the same: it has nothing to do"


def test_a_guard_turned_off_is_not_a_failure(tmp_path: Path) -> None:
    status, detail = boot_guard_report(guard_dir(tmp_path, "off"), "vastai")
    assert (status, detail["state"], detail["armed"]) == ("ready", "off", False)


def test_no_guard_directory_means_none_ran(tmp_path: Path) -> None:
    env = {BOOT_GUARD_DIR_ENV: str(tmp_path / "absent")}
    status, detail = boot_guard_report(env, "vastai")
    assert (status, detail["state"]) == ("ready", "none")
    assert not (tmp_path / "absent").exists(), "the agent creates nothing of the guard's"


def test_a_directory_without_a_verdict_waits_then_fails_bounded(tmp_path: Path) -> None:
    env = guard_dir(tmp_path, None)
    status, detail = boot_guard_report(env, "vastai", wait_s=0.2)
    assert status == "failed" and "no verdict within 0.2 s" in detail["reason"]


def test_an_unreadable_verdict_fails(tmp_path: Path) -> None:
    status, detail = boot_guard_report(guard_dir(tmp_path, "armed python3 soon"), "vastai")
    assert status == "failed" and "an unreadable verdict" in detail["reason"]


def test_a_marker_that_cannot_be_written_fails_loudly(tmp_path: Path) -> None:
    env = guard_dir(tmp_path, "armed python3 1200")
    marker(env).mkdir()  # root can write anywhere: a directory in the marker's place it cannot
    status, detail = boot_guard_report(env, "vastai")
    assert status == "failed"
    assert detail["reason"].startswith("cannot stand the boot guard down")
    assert "destroy this instance at the end of its grace" in detail["reason"]
    assert "boot_grace_mins = 0" in detail["reason"]


def test_local_and_docker_nodes_need_no_guard(tmp_path: Path) -> None:
    env = {BOOT_GUARD_DIR_ENV: str(tmp_path / "absent")}
    for provider in ("local", "docker"):
        status, detail = boot_guard_report(env, provider)
        assert (status, detail["state"]) == ("ready", "not_needed")
        assert "does not bill" in detail["reason"]

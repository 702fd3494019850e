"""The command-line surface, run as a user runs it: a real subprocess of the installed script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from mvp_tui.cli import COMMANDS


def run(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST", "RUNPOD"))}
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "mvp_tui", *args],
        capture_output=True,
        text=True,
        env=base,
        timeout=60,
        cwd=cwd,
    )


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("mvp-tui 0.")


def test_help_documents_commands_and_exit_codes() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in ("config", *COMMANDS):
        assert command in result.stdout
    for line in (
        "0  success",
        "1  the run failed",
        "2  bad usage or configuration",
        "3  a lease may still exist and bill",
    ):
        assert line in result.stdout
    assert "--vastai-disk-gb" in result.stdout


def test_replay_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run("replay", str(tmp_path / "nope.jsonl"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "--datastream-frame-log" in result.stderr


def test_down_needs_a_run_or_all() -> None:
    result = run("down")
    assert result.returncode == 2 and "RUN id or --all" in result.stderr


def test_bad_config_value_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[prompt]\nmax_tokens = -3\n")
    result = run("--config", str(tmp_path / "config.toml"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "[prompt] max_tokens = -3" in lines[0] and "config.toml:2" in lines[0]
    assert "Traceback" not in result.stderr


def test_config_command_prints_sources_and_redacts(tmp_path: Path) -> None:
    result = run("config", "--provider", "vastai", env={"VASTAI_API_KEY": "super-secret-abcdef"})
    assert result.returncode == 0, result.stderr
    assert "super-secret-abcdef" not in result.stdout + result.stderr
    assert "api_key = <redacted>" in result.stdout
    assert "# flag --provider" in result.stdout


def test_config_flag_after_subcommand_and_bool_negation() -> None:
    result = run("config", "--provider", "vastai", "--no-vastai-require-verified")
    assert result.returncode == 0, result.stderr
    assert "require_verified = false" in result.stdout
    assert "# flag --no-vastai-require-verified" in result.stdout


def test_console_script_is_installed() -> None:
    script = shutil.which("mvp-tui", path=str(Path(sys.executable).parent))
    assert script is not None
    result = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0


def test_unknown_theme_is_a_config_error() -> None:
    result = run(env={"MVP_UI_THEME": "neon"})
    assert result.returncode == 2
    assert "[ui] theme = 'neon' (from env MVP_UI_THEME)" in result.stderr
    assert "mvp-light" in result.stderr and "Traceback" not in result.stderr


def test_dashboard_for_vastai_without_a_key_exits_2_before_the_screen() -> None:
    result = run("--provider", "vastai")
    assert result.returncode == 2
    assert "[vastai] api_key is required" in result.stderr


def test_offers_when_the_provider_cannot_be_asked_says_why_without_a_traceback(
    tmp_path: Path,
) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MVP_NODE_PROVIDER": "vastai",
               "VASTAI_API_KEY": "k-0123456789abcdef", "MVP_VASTAI_API_URL": url}
        done = subprocess.run([sys.executable, "-m", "mvp_tui", "offers"], env=env,
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("mvp-tui: ")

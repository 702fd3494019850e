"""mkdocs hook: the dashboard's screenshots are the snapshot tests' SVGs
(tests/tui/__snapshots__/), added to the site at build time under `screenshots/`, so a page
always shows the screens the tests hold and `--snapshot-update` refreshes the docs too. A
snapshot named here that no longer exists fails the build, naming it."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

SNAPSHOTS = Path(__file__).resolve().parents[1] / "tests" / "tui" / "__snapshots__"

# Site path (under docs/, as pages link it) -> the snapshot it is.
SCREENSHOTS = {
    "screenshots/mid-run.svg": "test_app_snapshots/test_app_mid_run[160x48-mvp-dark].svg",
    "screenshots/mid-run-light.svg": "test_app_snapshots/test_app_mid_run[160x48-mvp-light].svg",
    "screenshots/mid-run-80x24.svg": "test_app_snapshots/test_app_mid_run[80x24-mvp-dark].svg",
    "screenshots/lease-confirm.svg":
        "test_app_snapshots/test_app_lease_confirm[160x48-mvp-dark].svg",
    "screenshots/failure-view.svg": "test_app_snapshots/test_app_failure_view[160x48-mvp-dark].svg",
    "screenshots/board-fit-ready.svg":
        "test_fit_snapshots/test_board_with_fit_and_ready[160x48].svg",
    "screenshots/zoomed-pane.svg": "test_fit_snapshots/test_a_zoomed_pane.svg",
    "screenshots/board-failed-host.svg":
        "test_board_memory_snapshots/test_board_with_a_failed_host[160x48].svg",
    "screenshots/failed-host-detail.svg":
        "test_board_memory_snapshots/test_board_failed_host_detail.svg",
    "screenshots/model-picker.svg":
        "test_model_picker_snapshots/test_picker_quants_and_fit[160x48].svg",
    "screenshots/bootstrap-budgets.svg":
        "test_attempt_snapshots/test_bootstrap_with_stage_budgets[160x48].svg",
    "screenshots/leases-replacement.svg":
        "test_attempt_snapshots/test_leases_with_a_failed_host_and_a_replacement[160x48].svg",
    "screenshots/bootstrap-prefetch.svg":
        "test_prefetch_snapshots/test_bootstrap_fetching_at_boot_ssh_pending[160x48].svg",
    "screenshots/switch-armed.svg": "test_snapshots/test_node_switch_armed[160x48].svg",
    "screenshots/switch-failed.svg": "test_snapshots/test_node_switch_failed[160x48].svg",
    "screenshots/idle-stop-row.svg":
        "test_endpoint_snapshots/test_bootstrap_with_the_idle_stop_row[160x48].svg",
    "screenshots/endpoint-line.svg":
        "test_endpoint_snapshots/test_prompt_pane_with_the_endpoint_line[160x48].svg",
    "screenshots/help.svg": "test_snapshots/test_help_screen.svg",
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for site_path, snapshot in SCREENSHOTS.items():
        source = SNAPSHOTS / snapshot
        if not source.is_file():
            raise PluginError(
                f"docs_hooks/screenshots.py: the snapshot {snapshot} is gone; name another "
                "in SCREENSHOTS (tests/tui/__snapshots__/ holds them)"
            )
        files.append(File.generated(config, site_path, abs_src_path=str(source)))
    return files

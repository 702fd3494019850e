"""Start-up: whole processes, side by side in one run, medians of `--runs` (default 5).

Figures printed:
- dashboard launch → first full paint, against a bare Textual app (Header, Static, Footer):
  each runs in a 160x48 pseudo-terminal; the clock stops when the footer's text (the last row
  Textual draws) has been written to the terminal;
- `mvp-tui --version` against `python -c pass` (process start to exit).

The dashboard runs on the `local` provider with an empty state dir and no config file, so
nothing is rented and no network is asked before the first paint.

Run: .venv/bin/python bench/bench_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.worktree import worktree_env  # noqa: E402
from tests.faults.pty_dashboard import PtyDashboard  # noqa: E402

BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Header, Static

class Bare(App[None]):
    def compose(self):
        yield Header()
        yield Static("bare")
        yield Footer()

Bare().run()
"""
FOOTER = "palette"  # the last row both apps draw: the footer, ending with the palette key
COLS, ROWS = 160, 48


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far, from /proc (10 ms ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def paint_time(env: dict[str, str], argv: tuple[str, ...]) -> tuple[float, float]:
    """(wall, CPU) seconds from launch to the first full paint."""
    began = time.perf_counter()
    term = PtyDashboard(env, cols=COLS, rows=ROWS, argv=argv)
    try:
        term.wait_for(FOOTER, within=60)
        return time.perf_counter() - began, cpu_seconds(term.proc.pid)
    finally:
        term.kill()  # nothing leased: the dashboard's net has nothing to tear down


def process_time(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, timeout=60)
    return time.perf_counter() - began


def medians(runs: int, *timed: Callable[[], float]) -> list[float]:
    """Median of each after a warm-up run, the runs alternating so a busy neighbour weighs on
    both alike."""
    samples: list[list[float]] = [[] for _ in timed]
    for _ in range(runs + 1):
        for index, run in enumerate(timed):
            samples[index].append(run())
    return [statistics.median(s[1:]) for s in samples]


def row(label: str, ours: float, floor_label: str, floor: float, target: str) -> None:
    print(
        f"  {label:<34} {ours * 1000:7.0f} ms   {floor_label:<30} {floor * 1000:6.0f} ms"
        f"   ratio {ours / floor:5.2f}x   (target {target})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp_dir:
        tmp = Path(tmp_dir)
        env = {
            "MVP_PROVIDER": "local",
            "MVP_STATE_DIR": str(tmp / "state"),
            "XDG_CONFIG_HOME": str(tmp / "config"),
            "PYTHONPATH": str(REPO),
            **worktree_env(),
        }
        # As installed: bytecode cached (a warm-up run writes it), not compiled per start.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        bare = tmp / "bare_app.py"
        bare.write_text(BARE_APP)
        cpus: dict[str, list[float]] = {"dash": [], "bare": []}

        def painted(name: str, argv: tuple[str, ...]) -> Callable[[], float]:
            def run() -> float:
                wall, cpu = paint_time(env, argv)
                cpus[name].append(cpu)  # load-proof: what the process itself spent
                return wall

            return run

        dash, floor = medians(
            args.runs, painted("dash", ("-m", "mvp_tui")), painted("bare", (str(bare),))
        )
        dash_cpu, floor_cpu = (statistics.median(cpus[k][1:]) for k in ("dash", "bare"))
        print(f"start-up, medians of {args.runs} (pty {COLS}x{ROWS}):")
        row("dashboard launch → first paint", dash, "bare Textual app", floor, "≤ 1.5x")
        row("  the same, CPU time used", dash_cpu, "bare Textual app, CPU", floor_cpu, "≤ 1.5x")
        proc_env = {**os.environ, **env}
        version, nothing = medians(
            args.runs,
            lambda: process_time([sys.executable, "-m", "mvp_tui", "--version"], proc_env),
            lambda: process_time([sys.executable, "-c", "pass"], proc_env),
        )
        row("mvp-tui --version", version, "python -c pass", nothing, "≤ 3x")


if __name__ == "__main__":
    main()

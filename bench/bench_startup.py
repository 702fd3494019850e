"""Start-up: whole processes, side by side in one run, medians of `--runs` (default 5).

Figures printed:
- dashboard launch → first full paint, against a bare Textual app (Header, Static, Footer):
  each runs in a 160x48 pseudo-terminal; the clock stops when the footer's text (the last row
  Textual draws) has been written to the terminal;
- `mvp-tui --version` against `python -I -c pass` (process start to exit), both outside the
  dev venv: each runs the interpreter of a throwaway venv holding this checkout's package in
  its installed layout, and one .pth naming the dev venv's packages as a plain path entry.
  So neither side runs the dev venv's editable-install finder (12 of `site`'s 15 ms, and it
  pre-imports pathlib, re and urllib.parse, which mvp-tui would otherwise pay for), a
  worktree's sitecustomize, or any .pth of the base interpreter's own site-packages (this
  machine's imports certifi: 50 ms). `python -I -S -c pass` and `python -I -c "import
  argparse"` are printed beside it.

Each pair alternates which side runs first; the load average is printed with the figures.
The dashboard runs on the `local` provider with an empty state dir and no config file, so
nothing is rented and no network is asked before the first paint.

Run: .venv/bin/python bench/bench_startup.py [--runs 5] [--smoke]
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

from bench.smoke import add_smoke, alternating, load_note, verdict  # noqa: E402
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
WARM_UP = [1]  # rounds not counted (none in a smoke run)


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
    """Median of each after a warm-up round, the order alternating round by round so a busy
    neighbour or a warm cache weighs on both alike."""
    warm = WARM_UP[0]
    return [statistics.median(s[warm:]) for s in alternating(runs + warm, *timed)]


def row(label: str, ours: float, floor_label: str, floor: float, target: str) -> None:
    print(
        f"  {label:<34} {ours * 1000:7.0f} ms   {floor_label:<34} {floor * 1000:6.0f} ms"
        f"   ratio {ours / floor:5.2f}x   ({target})"
    )


def installed_like(tmp: Path) -> tuple[Path, Path]:
    """(interpreter, console script) of a throwaway venv that imports mvp-tui and the dev
    venv's packages as an installed wheel would: the package in its installed layout (this
    checkout's files linked in, providers/ widgets/ themes/ as subpackages), plain sys.path
    entries, no .pth of the dev venv processed (so no editable finder), and the `mvp-tui`
    script pip would write."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    venv = tmp / "venv"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    package = site / "mvp_tui"
    package.mkdir()
    for entry in (REPO / "mvp_tui").iterdir():
        (package / entry.name).symlink_to(entry)
    for sub in ("providers", "widgets", "themes"):
        (package / sub).symlink_to(REPO / sub)
    dev_site = next(p for p in sys.path if p.endswith("site-packages") and sys.prefix in p)
    (site / "mvp_tui_bench.pth").write_text(f"{dev_site}\n")
    script = venv / "bin" / "mvp-tui"
    script.write_text(
        f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom mvp_tui.cli import main\n"
        "if __name__ == '__main__':\n    sys.exit(main())\n"
    )
    return venv / "bin" / "python", script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, WARM_UP[0] = 1, 0
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
        dash_cpu, floor_cpu = (statistics.median(cpus[k][WARM_UP[0]:]) for k in ("dash", "bare"))
        print(f"start-up, medians of {args.runs}, alternating (pty {COLS}x{ROWS}; "
              f"{load_note()}):")
        paint_ok = dash / floor <= 1.5
        row("dashboard launch → first paint", dash, "bare Textual app", floor,
            f"target ≤ 1.5x {verdict(paint_ok, args.smoke)}")
        row("  the same, CPU time used", dash_cpu, "bare Textual app, CPU", floor_cpu,
            f"target ≤ 1.5x {verdict(dash_cpu / floor_cpu <= 1.5, args.smoke)}")
        python, script = installed_like(tmp)
        py = str(python)  # both sides: the same clean interpreter
        # Nothing of the dev shell: no PYTHONPATH, no MVP_WT, no sitecustomize (-I drops the
        # PYTHON* variables anyway); the state and config dirs as above.
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("PYTHON", "MVP_"))} | {
            k: v for k, v in env.items() if k.startswith(("MVP_STATE", "XDG"))}
        version, nothing, bare_s, argparse_s = medians(
            args.runs,
            lambda: process_time([py, "-I", str(script), "--version"], clean),
            lambda: process_time([py, "-I", "-c", "pass"], clean),
            lambda: process_time([py, "-I", "-S", "-c", "pass"], clean),
            lambda: process_time([py, "-I", "-c", "import argparse"], clean),
        )
        print(f"--version, medians of {args.runs}, alternating ({load_note()}):")
        row("mvp-tui --version (installed-like)", version, "python -I -c pass", nothing,
            f"target ≤ 3x {verdict(version / nothing <= 3, args.smoke)}")
        row("", version, "python -I -S -c pass", bare_s, "no site at all")
        row("", version, 'python -I -c "import argparse"', argparse_s, "the parser's floor")


if __name__ == "__main__":
    main()

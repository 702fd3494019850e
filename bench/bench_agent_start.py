"""The node agent's start: process spawn → its first frame line on stdout, as the local
provider starts it (`python3 agent.pyz`), against the same package run from source with its
bytecode cached (`python3 -m mvp_tui.node`, what the zip gives up: zipimport compiles every
module on each start) and a bare `python3 -c` printing one line.

`--agent FILE` adds another agent file to compare (e.g. an older single-file node_agent.py
taken from git). Runs alternate; medians of N each.

Run: .venv/bin/python bench/bench_agent_start.py [--runs 21] [--agent FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.smoke import add_smoke  # noqa: E402
from mvp_tui.agent_bundle import agent_zip  # noqa: E402

ENV = {"PATH": os.environ.get("PATH", ""), "MVP_RUN_ID": "r-bench", "MVP_MODEL_ID": "tiny",
       "MVP_GGUF_LOCAL_PATH": "/nonexistent.gguf"}


def first_line(argv: list[str]) -> float:
    """Seconds from spawn to the first stdout line; the process is then stopped."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=ENV, cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.kill()
    proc.wait()
    assert line, f"{argv} printed nothing"
    return elapsed


def main(runs: int, extra: list[str]) -> None:
    python = sys.executable
    cases = {
        "bare python -c print": [python, "-c", "print('x')"],
        "python agent.pyz (zipapp)": [python, str(agent_zip())],
        "python -m mvp_tui.node (source, .pyc)": [python, "-m", "mvp_tui.node"],
    }
    for path in extra:
        cases[f"python {Path(path).name} (given)"] = [python, path]
    for argv in cases.values():
        first_line(argv)  # warm the page cache and any bytecode cache
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, argv in cases.items():
            times[name].append(first_line(argv))
    zipped = statistics.median(times["python agent.pyz (zipapp)"])
    print(f"runs: {runs} each, alternating; {python}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:42} median {median * 1000:7.1f} ms  ({median / zipped:.2f}x the zipapp)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--agent", action="append", default=[])
    add_smoke(parser)
    args = parser.parse_args()
    main(1 if args.smoke else args.runs, args.agent)

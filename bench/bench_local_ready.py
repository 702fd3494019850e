"""Enter → ready on this machine: a whole local run against the engine started by hand.

Figures printed, medians of `--runs` (default 5), the two alternating in one run:
- `mvp-tui up --headless --until ready --down-after` on the tiny model (lease the local node,
  start the agent, the engine, wait until it serves, tear down confirmed), process start to
  exit;
- the floor: start the same engine command directly, poll its readiness URL every 10 ms
  until it answers 200, stop it (SIGTERM, wait).
The ratio is ours / floor (target ≤ 1.25x). With `--trace`, one run's engine events and agent
phases are printed with their times, to see where the difference goes.

Run: .venv/bin/python bench/bench_local_ready.py [--runs 5] [--trace]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.smoke import add_smoke, load_note  # noqa: E402
from bench.worktree import worktree_env  # noqa: E402
from tests.fakes.tiny_gguf import write_tiny_gguf  # noqa: E402


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def engine_floor(model: Path) -> float:
    """Start llama-cpp-python's server as the agent would, poll until ready, stop it."""
    port = free_port()
    argv = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--interrupt_requests", "False",
        "--model_alias", "tiny",
    ]
    url = f"http://127.0.0.1:{port}/v1/models"
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if proc.poll() is not None:
                raise SystemExit(f"the engine exited with {proc.returncode} before it was ready")
            time.sleep(0.01)
    finally:
        proc.terminate()
        proc.wait(30)
    return time.perf_counter() - began


def ours(model: Path, state: Path, trace: bool = False) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST", "RUNPOD"))}
    env.update({"MVP_STATE_DIR": str(state), "PYTHONPATH": str(REPO)})
    env.update(worktree_env())
    argv = [
        sys.executable, "-m", "mvp_tui", "up", "--headless", "--until", "ready",
        "--down-after", "--provider", "local", "--gguf-local-path", str(model),
        "--rpc-bind", "127.0.0.1:0",
    ]
    began = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    lines: list[tuple[float, str]] = []
    for raw in proc.stdout:
        lines.append((time.perf_counter() - began, raw.decode("utf-8", "replace")))
    _, err = proc.communicate(timeout=120)
    spent = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"mvp-tui exited {proc.returncode}: {err.decode()[-2000:]}")
    if trace:
        print_trace(lines)
    return spent


def print_trace(lines: list[tuple[float, str]]) -> None:
    print("  one run, as it printed (seconds since the process started):")
    for at, line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        kind = record.get("event") or record.get("channel", "")
        payload = record.get("payload")
        if isinstance(payload, dict) and "phase" in payload:
            kind = f"{kind} {payload['phase']} {payload.get('status', '')}"
        elif isinstance(payload, dict) and "type" in payload:
            kind = f"{kind} {payload['type']}"
        elif isinstance(payload, str):
            kind = f"{kind}: {payload[:70]}"
        print(f"    {at:6.3f}  {kind}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trace", action="store_true")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    # As installed: bytecode cached (the warm-up runs write it), not compiled per start.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="bench-ready-") as tmp_dir:
        tmp = Path(tmp_dir)
        model = write_tiny_gguf(tmp / "tiny.gguf")
        if not args.smoke:
            engine_floor(model)  # warm-ups: file caches, bytecode
            ours(model, tmp / "state-warm-up")
        mine, floor = [], []
        for run in range(args.runs):  # the order swapped each run
            if run % 2:
                floor.append(engine_floor(model))
            mine.append(ours(model, tmp / f"state-{run}", trace=args.trace and run == 0))
            if run % 2 == 0:
                floor.append(engine_floor(model))
        a, b = statistics.median(mine), statistics.median(floor)
        print(f"enter → ready → torn down, medians of {args.runs}, order alternating (local, "
              f"tiny model; {load_note()}):")
        print(
            f"  up --headless --until ready --down-after {a:6.2f} s   engine alone (start, "
            f"poll 10 ms, stop) {b:6.2f} s   ratio {a / b:4.2f}x (target ≤ 1.25x)"
        )


if __name__ == "__main__":
    main()

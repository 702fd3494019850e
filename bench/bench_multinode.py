"""Benchmark: one model over several nodes on llama.cpp's RPC backend.

1. Generation speed, same run, same model: llama-server alone against llama-server with its
   layers on one loopback `ggml-rpc-server` worker (started as the node agent starts it, -t 1
   everywhere). Prints median tok/s of each (llama-server's own `predicted_per_second`), the
   ratio split/alone and the per-token overhead (1/split − 1/alone). The reference for this
   machine: about 1 ms per token added on loopback.
2. Enter → ready: `mvp-tui up --headless --provider local --nodes N --until ready` for
   N = 1, 2, 3, from the run's `run_started` to its `node_ready` event (medians).

Needs the binaries of scripts/llama-rpc-build.sh.

    .venv/bin/python bench/bench_multinode.py [--runs 9] [--tokens 128] [--ready-runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.smoke import add_smoke
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.peers import llama_rpc_bin_dir

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_health(url: str, proc: subprocess.Popen[bytes], within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # polling a server that has no readiness push
    raise RuntimeError("llama-server not ready")


def wait_listen(port: int, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 1):
                return
        except OSError:
            time.sleep(0.05)  # polling: the RPC server has no readiness signal
    raise RuntimeError("ggml-rpc-server did not listen")


def tok_s(url: str, tokens: int) -> float:
    body = {"prompt": "benchmark the split", "n_predict": tokens, "temperature": 0,
            "cache_prompt": False}
    answer = httpx.post(url + "/completion", json=body, timeout=120).json()
    return float(answer["timings"]["predicted_per_second"])


def serve(bin_dir: str, model: Path, rpc: str | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [f"{bin_dir}/llama-server", "-m", str(model), "--host", "127.0.0.1",
            "--port", str(port), "-t", "1", "-c", "512"]
    argv += ["--rpc", rpc, "-ngl", "99"] if rpc else []
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_health(url, proc)
    return proc, url


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def bench_split(bin_dir: str, model: Path, runs: int, tokens: int) -> None:
    port = free_port()
    worker = subprocess.Popen(
        [f"{bin_dir}/ggml-rpc-server", "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, restore_signals=False,
    )
    alone = split = None
    try:
        wait_listen(port)
        alone, alone_url = serve(bin_dir, model, None)
        split, split_url = serve(bin_dir, model, f"127.0.0.1:{port}")
        tok_s(alone_url, 8), tok_s(split_url, 8)  # warm both
        a, s = [], []
        for _ in range(runs):  # interleaved: both see the same load
            a.append(tok_s(alone_url, tokens))
            s.append(tok_s(split_url, tokens))
    finally:
        for proc in (split, alone, worker):
            if proc is not None:
                stop(proc)
    ma, ms = statistics.median(a), statistics.median(s)
    overhead_ms = (1 / ms - 1 / ma) * 1000
    print(f"generation ({tokens} tokens, median of {runs}, -t 1):")
    print(f"  llama-server alone        {ma:8.1f} tok/s")
    print(f"  split over 1 RPC worker   {ms:8.1f} tok/s")
    print(f"  ratio split/alone         {ms / ma:8.3f}")
    print(f"  per-token overhead        {overhead_ms:8.2f} ms")


def enter_to_ready(bin_dir: str, model: Path, nodes: int, state: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    env.update(MVP_STATE_DIR=str(state), MVP_RPC_BIN_DIR=bin_dir, MVP_ENGINE_THREADS="1",
               PATH=f"{bin_dir}:{env.get('PATH', '')}", PYTHONPATH=str(REPO))
    argv = [sys.executable, "-m", "mvp_tui", "up", "--headless", "--provider", "local",
            "--nodes", str(nodes), "--gguf-local-path", str(model), "--until", "ready",
            "--rpc-bind", "127.0.0.1:0", "--down-after",
            # The workers' RPC servers on this machine's loopback, unauthenticated: the bench
            # machine is the developer's own (the run refuses without the acknowledgement).
            "--local-rpc-unauthenticated"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    events = {}
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        events.setdefault(record.get("event"), record)
    if proc.returncode != 0 or "node_ready" not in events:
        raise RuntimeError(f"N={nodes} run failed ({proc.returncode}): {proc.stderr[-400:]}")
    return float(events["node_ready"]["at"]) - float(events["run_started"]["at"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--ready-runs", type=int, default=3)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.tokens, args.ready_runs = 1, 8, 1
    bin_dir = llama_rpc_bin_dir()
    if not os.access(f"{bin_dir}/ggml-rpc-server", os.X_OK):
        sys.exit(f"no ggml-rpc-server in {bin_dir}: run scripts/llama-rpc-build.sh first")
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_gguf(Path(tmp) / "bench.gguf", f16=True, embd=256, layers=8, heads=8,
                                ctx=1024)
        bench_split(bin_dir, model, args.runs, args.tokens)
        print(f"Enter -> ready (`up --headless --until ready`, median of {args.ready_runs}):")
        base = None
        for nodes in (1, 2) if args.smoke else (1, 2, 3):
            times = [
                enter_to_ready(bin_dir, model, nodes, Path(tmp) / f"state-{nodes}-{i}")
                for i in range(args.ready_runs)
            ]
            median = statistics.median(times)
            base = base or median
            print(f"  N={nodes}  {median * 1000:8.0f} ms  ({median / base:.2f}x N=1)")


if __name__ == "__main__":
    main()

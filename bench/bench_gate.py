"""Benchmark: what the agent's gate (the authenticating proxy in front of the engine) costs
a streamed completion.

Starts the node agent with a key on a generated model (native llama-server when
scripts/llama-rpc-build.sh built it, else llama-cpp-python's server), then alternates the same
streamed chat request sent to the engine's private port directly and through the gate (both
with the key), the order swapped every pair. Prints median tok/s (send to [DONE]) and median
TTFT for each, and the gate's cost as the spread of per-pair differences: per token, the
difference of each pair's time between tokens ((total - TTFT) / (tokens - 1)), and for TTFT;
the median with its interquartile range and a 95 % bootstrap interval of the median. Where
that interval holds 0 the bench says the cost is not resolvable from zero at this rate. The
targets: the gate adds < 50 µs per token and < 5 ms to TTFT (the interval's upper end must be
under them). The tiny model streams thousands of tokens a second, the gate's worst case:
there 50 µs is a tenth of the rate; at a real model's 50-200 tok/s (5-20 ms a token) it is
under 1 %.

    .venv/bin/python bench/bench_gate.py [--runs 15] [--max-tokens 400] [--engine auto|python]
        [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.smoke import add_smoke, load_note, verdict
from tests.agent.agent_run import AgentRun, agent_env
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.peers import llama_rpc_bin_dir

KEY = "mvp-bench-key-0123456789abcdef"
PER_TOKEN_TARGET_US = 50.0
TTFT_OVERHEAD_TARGET_MS = 5.0


async def one(http: httpx.AsyncClient, port: int, max_tokens: int) -> tuple[int, float, float]:
    body = {"messages": [{"role": "user", "content": "bench"}], "max_tokens": max_tokens,
            "stream": True, "temperature": 0}
    started = time.perf_counter()
    first = 0.0
    tokens = 0
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    async with http.stream("POST", url, json=body,
                           headers={"Authorization": f"Bearer {KEY}"}) as answer:
        answer.raise_for_status()
        async for line in answer.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                tokens += 1
                first = first or time.perf_counter() - started
    return tokens, first, time.perf_counter() - started


def per_token_s(row: tuple[int, float, float]) -> float:
    """Time between tokens in one stream: TTFT left out, so it is the stream's pace alone."""
    tokens, first, total = row
    return (total - first) / max(1, tokens - 1)


def spread(diffs: list[float], draws: int = 2000) -> tuple[float, float, float, float, float]:
    """(median, lower quartile, upper quartile, 95 % bootstrap interval of the median)."""
    if len(diffs) < 2:
        return diffs[0], diffs[0], diffs[0], diffs[0], diffs[0]
    q1, _, q3 = statistics.quantiles(diffs, n=4)
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(draws))
    low, high = medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]
    return statistics.median(diffs), q1, q3, low, high


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--engine", choices=("auto", "python"), default="auto")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.max_tokens = 2, 16
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_gguf(Path(tmp) / "tiny.gguf", seed=0)
        env = agent_env(Path(tmp), MVP_GGUF_LOCAL_PATH=str(model), MVP_API_KEY=KEY,
                        MVP_MAX_CONTEXT="1024")
        native = llama_rpc_bin_dir()
        if args.engine == "auto" and os.access(f"{native}/llama-server", os.X_OK):
            env["PATH"] = f"{native}{os.pathsep}{env.get('PATH', '')}"
        run = await AgentRun.start(env)
        try:
            loaded = await run.weights(within=60)
            gate = loaded["port"]
            direct = run.phase_detail("engine_start", "ready")["port"]
            results: dict[str, list[tuple[int, float, float]]] = {"direct": [], "gate": []}
            async with httpx.AsyncClient(timeout=60) as http:
                await one(http, gate, 16)  # warm both paths
                await one(http, direct, 16)
                for n in range(args.runs):  # the order swapped each pair
                    for name in ("direct", "gate") if n % 2 == 0 else ("gate", "direct"):
                        port = direct if name == "direct" else gate
                        results[name].append(await one(http, port, args.max_tokens))
            await run.send("shutdown\n")
            await run.wait_exit()
        finally:
            await run.kill()
    print(f"engine {loaded['engine']}, {args.runs} pairs of {args.max_tokens} tokens, order "
          f"alternating, medians ({load_note()}):")
    for name, rows in results.items():
        tok_s = statistics.median(t / total for t, _, total in rows)
        ttft_ms = statistics.median(first for _, first, _ in rows) * 1000
        print(f"  {name:<7} {tok_s:8.0f} tok/s   TTFT {ttft_ms:6.1f} ms   "
              f"{statistics.median(per_token_s(r) for r in rows) * 1e6:6.1f} µs between tokens")
    pairs = list(zip(results["direct"], results["gate"], strict=True))
    token_us = spread([(per_token_s(g) - per_token_s(d)) * 1e6 for d, g in pairs])
    ttft_ms = spread([(g[1] - d[1]) * 1000 for d, g in pairs])
    ok = token_us[4] < PER_TOKEN_TARGET_US and ttft_ms[4] < TTFT_OVERHEAD_TARGET_MS
    for label, (median, q1, q3, low, high), unit, target in (
        ("a token", token_us, "µs", PER_TOKEN_TARGET_US),
        ("to TTFT", ttft_ms, "ms", TTFT_OVERHEAD_TARGET_MS),
    ):
        resolved = "" if low > 0 or high < 0 else "  (holds 0: not resolvable from zero here)"
        print(f"the gate adds {label}: median {median:+.1f} {unit} (quartiles {q1:+.1f} to "
              f"{q3:+.1f}; 95 % interval of the median {low:+.1f} to {high:+.1f}; target < "
              f"{target:g}){resolved}")
    print(f"verdict: {verdict(ok, args.smoke)}")
    return 0 if ok or args.smoke else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

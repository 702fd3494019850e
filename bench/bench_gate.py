"""Benchmark: what the agent's gate (the authenticating proxy in front of the engine) costs
a streamed completion.

Starts the node agent with a key on a generated model (native llama-server when
scripts/llama-rpc-build.sh built it, else llama-cpp-python's server), then alternates the same
streamed chat request sent to the engine's private port directly and through the gate (both
with the key). Prints median tok/s (send to [DONE]) and median TTFT for each, and checks the
targets: the gate adds < 50 µs per token and < 5 ms to TTFT. The tiny model streams thousands
of tokens a second, the gate's worst case: there 50 µs is a tenth of the rate; at a real
model's 50-200 tok/s (5-20 ms a token) it is under 1 %.

    .venv/bin/python bench/bench_gate.py [--runs 9] [--max-tokens 400] [--engine auto|python]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--engine", choices=("auto", "python"), default="auto")
    args = parser.parse_args()
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
                for _ in range(args.runs):
                    results["direct"].append(await one(http, direct, args.max_tokens))
                    results["gate"].append(await one(http, gate, args.max_tokens))
            await run.send("shutdown\n")
            await run.wait_exit()
        finally:
            await run.kill()
    print(f"engine {loaded['engine']}, {args.runs} runs of {args.max_tokens} tokens, medians:")
    figures = {}
    for name, rows in results.items():
        tok_s = statistics.median(t / total for t, _, total in rows)
        ttft_ms = statistics.median(first for _, first, _ in rows) * 1000
        figures[name] = (tok_s, ttft_ms)
        print(f"  {name:<7} {tok_s:8.0f} tok/s   TTFT {ttft_ms:6.1f} ms")
    ratio = figures["gate"][0] / figures["direct"][0]
    per_token_us = (1 / figures["gate"][0] - 1 / figures["direct"][0]) * 1e6
    overhead = figures["gate"][1] - figures["direct"][1]
    ok = per_token_us < PER_TOKEN_TARGET_US and overhead < TTFT_OVERHEAD_TARGET_MS
    print(f"gate/direct tok/s {ratio:.3f}; the gate adds {per_token_us:+.1f} µs a token "
          f"(target < {PER_TOKEN_TARGET_US:g}) and {overhead:+.1f} ms to TTFT (target < "
          f"{TTFT_OVERHEAD_TARGET_MS:g}): {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

"""Benchmark: the dashboard's memory under use (issue 40 §4) — it must not grow per prompt.

The real dashboard (`MvpApp`, headless, in this process) starts a local run by Enter, as a
person would; its engine is the fake `llama-server` (tests/agent/fake_llama_server.py on
PATH: the real node agent, gate and forward, an answer of two tokens, no model to load), so
the figures are the dashboard's own. Then `--rpc` prompts go through the seed's prompt RPC
(one connection, one request after another, each through the pane's queue and the Prompt
pane), then `--endpoint` prompts through the run's OpenAI endpoint (the forward and gate),
and the process's RSS (/proc/self/status VmRSS) is sampled every `--every` prompts. The
verdict: after the first 500 prompts RSS stays within 10 MiB. `--trace` also prints, from
prompt `--trace-from` (500) to the last, the live objects that grew by type and what holds the
newest of them; with `--tracemalloc`, the Python heap's growth by file and traceback (slow).
Faults (a loaded machine's timeouts) are counted, not fatal.

    .venv/bin/python bench/bench_soak.py [--rpc 5000] [--endpoint 1000] [--every 250]
        [--trace [--trace-from N] [--tracemalloc]] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.smoke import add_smoke, load_note, verdict  # noqa: E402
from mvp_tui.config import ConfigPaths, load_config  # noqa: E402
from mvp_tui.engine.events import NodeReady, OffersListed  # noqa: E402
from mvp_tui.engine.run import RunEngine  # noqa: E402
from mvp_tui.engine.ui_port import UiPort  # noqa: E402
from mvp_tui.events import EngineEvent  # noqa: E402
from mvp_tui.lease import events as lease  # noqa: E402
from mvp_tui.tui.app import MvpApp  # noqa: E402

FAKE = REPO / "tests" / "agent" / "fake_llama_server.py"
WARM = 500  # prompts before the flat line is asked for
FLAT_MIB = 10.0
MAX_TOKENS = 16


def status_mib(*fields: str) -> list[float]:
    """Fields of /proc/self/status (kB) in MiB."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in fields:
            found[name] = int(value.split()[0]) / 1024
    return [found[name] for name in fields]


def rss_mib() -> float:
    return status_mib("VmRSS")[0]


class Seen:
    """The engine's events the bench waits on; nothing else kept (a list would grow)."""

    def __init__(self, *kinds: type[EngineEvent]) -> None:
        self.flags = {kind: asyncio.Event() for kind in kinds}
        self.last: dict[str, EngineEvent] = {}  # the last of each kind: said if a wait fails

    def __call__(self, event: EngineEvent) -> None:
        self.last[type(event).__name__] = event
        flag = self.flags.get(type(event))
        if flag is not None:
            flag.set()

    async def first(self, kind: type[EngineEvent], within: float = 60) -> None:
        try:
            await asyncio.wait_for(self.flags[kind].wait(), within)
        except TimeoutError:
            raise RuntimeError(f"no {kind.__name__} within {within} s; the last events: "
                               f"{list(self.last.values())[-8:]}") from None


def fake_engine_env(tmp: Path) -> dict[str, str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    script = bin_dir / "llama-server"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(0o755)
    os.environ["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"
    os.environ["FAKE_LOADING_PROBES"] = "1"
    os.environ.pop("FAKE_REQUESTS_FILE", None)
    from tests.fakes.tiny_gguf import write_tiny_gguf

    model = write_tiny_gguf(tmp / "tiny.gguf")
    return {"MVP_STATE_DIR": str(tmp / "state"), "MVP_PROMPT_OPENAI_PORT": "0",
            "MVP_GGUF_LOCAL_PATH": str(model), "MVP_PROMPT_RPC_BIND": "127.0.0.1:0",
            "MVP_PROMPT_MAX_TOKENS": str(MAX_TOKENS)}


def live_objects() -> Counter[str]:
    gc.collect()
    return Counter(type(o).__qualname__ for o in gc.get_objects())


def holders(name: str, depth: int = 4) -> str:
    """The chain of referrer types above the newest live object of type `name`."""
    found = [o for o in gc.get_objects() if type(o).__qualname__ == name]
    if not found:
        return "(none tracked)"
    chain, obj = [], found[-1]
    for _ in range(depth):
        up = [r for r in gc.get_referrers(obj)
              if r is not found and type(r).__name__ not in ("frame", "list")]
        if not up:
            break
        obj = up[0]
        label = type(obj).__qualname__
        if isinstance(obj, dict):
            owners = [type(r).__qualname__ for r in gc.get_referrers(obj)][:3]
            label += f"(of {owners})"
        chain.append(label)
    return " <- ".join(chain) or "(no referrer)"


class Samples:
    def __init__(self, every: int, trace: bool, by_line: bool = False) -> None:
        self.every, self.trace, self.tracemalloc = every, trace, by_line
        self.warm = WARM
        self.faults, self.last_fault = 0, ""
        self.backlog: Callable[[], str] = lambda: ""  # messages the UI has yet to handle
        self.points: list[tuple[str, int, float]] = []
        self.snapshot: tracemalloc.Snapshot | None = None
        self.objects: Counter[str] | None = None  # live objects by type at the 500th prompt

    def take(self, leg: str, done: int, total: int) -> None:
        if done % self.every and done != total:
            return
        self.points.append((leg, done, rss_mib()))
        anon, file = status_mib("RssAnon", "RssFile")
        fds = len(os.listdir("/proc/self/fd"))  # a connection per prompt left open shows here
        print(f"  {leg:9} {done:6d}  {self.points[-1][2]:7.1f} MiB (anon {anon:.1f}, "
              f"file {file:.1f}), {fds} fds{self.backlog()}", flush=True)  # as it goes
        if self.trace and leg == "rpc" and done == min(self.warm, total):
            self.objects = live_objects()
            if self.tracemalloc:  # from here on only: tracing every allocation is slow
                tracemalloc.start(6)
                self.snapshot = tracemalloc.take_snapshot()


async def rpc_leg(addr: str, token: str, count: int, samples: Samples) -> None:
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 20)
    try:
        for n in range(1, count + 1):
            line = {"request_id": n, "prompt_text": f"soak prompt {n}",
                    "max_tokens": MAX_TOKENS, "token": token}
            writer.write(json.dumps(line).encode() + b"\n")
            await writer.drain()
            reply: dict[str, object] = {}
            while reply.get("type") not in ("done", "fault"):
                reply = json.loads(await asyncio.wait_for(reader.readline(), 60))
            if reply["type"] == "fault":  # counted, not fatal: a loaded machine times out
                samples.faults += 1
                samples.last_fault = str(reply.get("error"))
            samples.take("rpc", n, count)
    finally:
        writer.close()


async def endpoint_leg(base_url: str, key: str, count: int, samples: Samples) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=60,
                                 headers={"Authorization": f"Bearer {key}"}) as http:
        for n in range(1, count + 1):
            body = {"model": "tiny", "stream": True, "max_tokens": MAX_TOKENS,
                    "messages": [{"role": "user", "content": f"soak request {n}"}]}
            async with http.stream("POST", "/v1/chat/completions", json=body) as response:
                response.raise_for_status()
                async for _ in response.aiter_bytes():
                    pass
            samples.take("endpoint", n, count)


async def soak(tmp: Path, rpc: int, endpoint: int, samples: Samples) -> None:
    env = fake_engine_env(tmp)
    config = load_config(env=env, paths=ConfigPaths(default=tmp / "none.toml"))
    port, seen = UiPort(), Seen(OffersListed, NodeReady, lease.LeaseDeleted)

    def tee(event: EngineEvent) -> None:
        port(event)
        seen(event)

    engine = RunEngine(config, tee)
    app = MvpApp(config, engine=engine, sink=port)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one("#prompt-pane")
        samples.backlog = lambda: (f", waiting messages: app {app._message_queue.qsize()}, "
                                   f"Prompt pane {pane._message_queue.qsize()}")
        await seen.first(OffersListed)
        await pilot.pause()
        await pilot.press("enter")  # the local offer: $0, no confirm
        await seen.first(NodeReady)
        record = engine.link.endpoint
        for _ in range(100):  # the record is written as the node serves
            if record is not None and record.rpc_addr and record.base_url:
                break
            await pilot.pause()
            record = engine.link.endpoint
        assert record is not None and record.rpc_addr, "the run has no prompt RPC address"
        samples.take("start", 0, 0)
        await rpc_leg(record.rpc_addr, record.rpc_token, rpc, samples)
        await endpoint_leg(record.base_url, record.api_key, endpoint, samples)
        await pilot.pause()
        app.query_one("#offers-pane").focus()
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("enter")  # "Destroy and quit"
        await seen.first(lease.LeaseDeleted)


def report(samples: Samples, smoke: bool) -> bool:
    if samples.faults:
        print(f"{samples.faults} prompts through the RPC failed; the last: {samples.last_fault}")
    after = [mib for leg, done, mib in samples.points
             if (leg == "rpc" and done >= WARM) or leg == "endpoint"]
    if not after:
        print("too few prompts to judge the line after the first 500")
        return True
    spread = max(after) - min(after)
    ok = spread <= FLAT_MIB
    print(f"RSS after the first {WARM} prompts: {min(after):.1f}–{max(after):.1f} MiB "
          f"(spread {spread:.1f} MiB, target <= {FLAT_MIB:.0f}) {verdict(ok, smoke)}")
    if samples.objects is not None:
        grown = live_objects()
        grown.subtract(samples.objects)
        print(f"live objects grown most since prompt {samples.warm} (by type):")
        for name, count in grown.most_common(12):
            print(f"  {count:+8d} {name}")
        for name, _ in grown.most_common(3):
            print(f"  what holds the last {name}: {holders(name)}")
    if samples.snapshot is not None:
        grown = tracemalloc.take_snapshot().compare_to(samples.snapshot, "traceback")
        total = sum(stat.size_diff for stat in grown) / 2**20
        print(f"the Python heap (traced) grew {total:+.1f} MiB in all")
        by_file = tracemalloc.take_snapshot().compare_to(samples.snapshot, "filename")
        for stat in by_file[:8]:
            print(f"  {stat}")
        print(f"grew most since prompt {samples.warm} (tracemalloc):")
        for stat in grown[:6]:
            print(f"  {stat}")
            for line in stat.traceback.format()[-12:]:
                print(f"      {line}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rpc", type=int, default=5000, help="prompts via the prompt RPC")
    parser.add_argument("--endpoint", type=int, default=1000, help="requests via the endpoint")
    parser.add_argument("--every", type=int, default=250, help="prompts between RSS samples")
    parser.add_argument("--trace", action="store_true",
                        help="what grew: live objects by type (and --tracemalloc)")
    parser.add_argument("--tracemalloc", action="store_true", help="with --trace: by line")
    parser.add_argument("--trace-from", type=int, default=WARM,
                        help="with --trace: the prompt the comparison starts from")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.rpc, args.endpoint, args.every = 20, 10, 10
    samples = Samples(args.every, args.trace, args.tracemalloc)
    samples.warm = args.trace_from
    print(f"the dashboard (headless, this process): {args.rpc} prompts via the prompt RPC, "
          f"then {args.endpoint} via the endpoint; RSS every {args.every} ({load_note()})",
          flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp_dir:
        asyncio.run(soak(Path(tmp_dir), args.rpc, args.endpoint, samples))
    ok = report(samples, args.smoke)
    print(f"({time.monotonic() - started:.0f} s in all)")
    sys.exit(0 if ok or args.smoke else 1)


if __name__ == "__main__":
    main()

"""A headless multi-node run on this machine, and what its records say about its processes."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.headless import HeadlessRun, Record


def cluster_run(
    bin_dir: str, model: Path, state: Path, *extra: str, nodes: int | None = 2, **env: str
) -> HeadlessRun:
    args = [
        "--provider", "local",
        *(["--nodes", str(nodes)] if nodes is not None else []),
        "--gguf-local-path", str(model),
        "--rpc-bind", "127.0.0.1:0",
        "--local-rpc-unauthenticated",  # workers on this machine's loopback: the test's own
        *extra,
    ]
    # -t 1 everywhere: the split turns erratic with more threads than this box has cores.
    return HeadlessRun(
        args, state, env={"MVP_RPC_BIN_DIR": bin_dir, "MVP_ENGINE_THREADS": "1", **env}
    )


def is_weights(record: Record, kind: str) -> bool:
    return (
        record.get("event") == "frame"
        and record.get("channel") == "mvp.worker.weights"
        and isinstance(record.get("payload"), dict)
        and record["payload"].get("type") == kind
    )


def weights_of(run: HeadlessRun, kind: str) -> list[dict[str, object]]:
    return [r["payload"] for r in run.records if is_weights(r, kind)]


def run_pids(run: HeadlessRun) -> list[int]:
    """Every agent (local lease) and engine process the run started."""
    agents = [
        int(e["provider_id"].removeprefix("local-"))
        for e in run.events("attempt_answered")
        if e.get("provider_id")
    ]
    engines = [
        int(p["engine_pid"])  # type: ignore[call-overload]
        for p in weights_of(run, "WeightsLoaded") + weights_of(run, "RpcServerReady")
        if p.get("engine_pid")
    ]
    return agents + engines


def engine_log(run: HeadlessRun, node_id: int) -> list[str]:
    return [str(f["payload"]) for f in run.frames(f"mvp.node.{node_id}.engine")]

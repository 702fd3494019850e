"""The configuration's trust rules, checked once the values are in: where an unauthenticated
RPC server would listen. Refusals are `ConfigError`s (exit 2, nothing started)."""

from __future__ import annotations

from collections.abc import Mapping

from mvp_tui.config.values import ConfigError, Source

# A worker's ggml-rpc-server: ggml RPC has no authentication and lets a client read and
# write the server's memory, so where it listens decides who owns that process.
LOCAL_ACK_FLAG = "--local-rpc-unauthenticated"
LOCAL_ACK = (
    f"{LOCAL_ACK_FLAG} (env MVP_LOCAL_RPC_UNAUTHENTICATED=true, or [runtime] "
    "local_rpc_unauthenticated = true)"
)


def check_multinode_rpc(
    provider: str, values: Mapping[str, object], sources: Mapping[str, Source]
) -> None:
    """Refuse a multi-node run whose workers' RPC servers others could reach: on a Docker
    bridge network always (every container on it reaches them), on this machine's loopback
    (provider local, Docker's host network) unless acknowledged."""
    nodes = values.get("runtime.nodes")
    if not isinstance(nodes, int) or nodes <= 1 or provider not in ("local", "docker"):
        return
    asked = f"[runtime] nodes = {nodes} from {sources['runtime.nodes']}"
    network = values.get("docker.network")
    if provider == "docker" and network == "bridge":
        raise ConfigError(
            f"{asked} with provider docker on [docker] network = 'bridge' (from "
            f"{sources['docker.network']}): the workers' ggml-rpc-server, which has no "
            "authentication and gives its clients the process's memory, would be reachable "
            "from every container on the bridge network",
            fix="use [runtime] nodes = 1 on a bridge network, --docker-network host with "
            f"{LOCAL_ACK_FLAG}, or a rented provider",
        )
    if values.get("runtime.local_rpc_unauthenticated"):
        return
    where = "provider local" if provider == "local" else "provider docker on the host network"
    raise ConfigError(
        f"{asked} with {where}: the workers' ggml-rpc-server listens on this machine's "
        "loopback with no authentication, so any local user can read and write that "
        "process's memory (next to a process that holds your cloud keys)",
        fix=f"acknowledge with {LOCAL_ACK} on a machine only you use, or rent the nodes",
    )

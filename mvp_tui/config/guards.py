"""The configuration's trust rules, checked once the values are in: where an unauthenticated
RPC server would listen. Refusals are `ConfigError`s (exit 2, nothing started)."""

from __future__ import annotations

from collections.abc import Mapping

from mvp_tui.config.values import ConfigError, Source

# A worker's ggml-rpc-server: ggml RPC has no authentication and lets a client read and
# write the server's memory, so where it listens decides who owns that process.


def check_multinode_rpc(
    provider: str, values: Mapping[str, object], sources: Mapping[str, Source]
) -> None:
    """Refuse a multi-node run whose workers' RPC servers others could reach: on a Docker
    bridge network (every container on it reaches them)."""
    nodes = values.get("runtime.nodes")
    if not isinstance(nodes, int) or nodes <= 1 or provider != "docker":
        return
    asked = f"[runtime] nodes = {nodes} from {sources['runtime.nodes']}"
    network = values.get("docker.network")
    if network == "bridge":
        raise ConfigError(
            f"{asked} with provider docker on [docker] network = 'bridge' (from "
            f"{sources['docker.network']}): the workers' ggml-rpc-server, which has no "
            "authentication and gives its clients the process's memory, would be reachable "
            "from every container on the bridge network",
            fix="use [runtime] nodes = 1 on a bridge network, --docker-network host, or a "
            "rented provider",
        )

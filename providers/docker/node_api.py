"""Provider docker on the node: its node is a container on this machine, so nothing bills and
nothing is destroyed through an API; the node's switch ends the node's own process. Shipped
in the agent's zipapp (mvp_tui/node/instance_api.py finds it by the provider's name)."""

from __future__ import annotations

from mvp_tui.node.instance_api import NodeApi

NODE_API = NodeApi("docker")

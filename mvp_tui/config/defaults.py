"""Defaults more than one key or module names, and the reasons the seed's unbuilt keys give."""

from __future__ import annotations

from mvp_tui.node_protocol import RENTED_IMAGE, RENTED_IMAGE_CUDA_MIN

# The providers are listed by their kinds (providers/registry.py: PROVIDERS, RENTED).
PROFILES = ("local", "deploy")
# The orchestrator seed's two profiles and the provider each selects (its own definition).
PROFILE_PROVIDER = {"local": "local", "deploy": "vastai"}

DEFAULT_HF_REPO = "bartowski/Llama-3.2-1B-Instruct-GGUF"
DEFAULT_HF_FILE = "Llama-3.2-1B-Instruct-Q4_K_M.gguf"
DEFAULT_MODEL_ID = "llama-3.2-1b-instruct-q4"
DEFAULT_IMAGE = "mvp-node:latest"
# What a rented node runs when neither [image] node nor the provider's image is set: llama.cpp's
# own CUDA image, pinned to a build, with its CUDA floor beside it (both in node_protocol.py,
# which the node reads too; python3 for the agent; llama-server at /app/llama-server, not on
# PATH, which the agent knows). DEFAULT_IMAGE is the seed's name for a locally built image.
__all__ = ["RENTED_IMAGE", "RENTED_IMAGE_CUDA_MIN"]
DEFAULT_RPC_ADDR = "127.0.0.1:19777"

WHOLE_MODEL = (
    "this engine (llama.cpp) serves the whole model on one node; pipeline stages are not built"
)
NO_IROH = "mvp-tui reaches nodes over SSH; the seed's iroh relay is not built"
NO_WEB_DASHBOARD = (
    "the seed's web dashboard is not built; run `mvp-tui` for the terminal dashboard "
    "(headless runs print every frame as a JSON line)"
)

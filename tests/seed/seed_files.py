"""The TOML files that appear in the seed's documents (002_…txt, its config tests), verbatim,
and the warning lines each must give here: the keys mvp-tui accepts but has not built."""

from __future__ import annotations

# `config_layers_defaults_toml_env_then_cli` (the seed's layering.toml).
LAYERING_TOML = """
[runtime]
profile = "deploy"
run_id = 41
node_id = 9
stage_index = 3
layer_end_exclusive = 24

[provider]
kind = "vastai"

[image]
node = "docker.io/example/from-image-node:toml"

[vastai]
image = "docker.io/example/from-vastai-image:toml"
api_key = "toml-key"
bootstrap_command = "/toml/bootstrap"
disk_gb = 60
gpu_name = "RTX 4090"

[prompt]
rpc_addr = "127.0.0.1:19999"
max_tokens = 17
dashboard = true

[model]
id = "toml-model"
gguf_repo = "toml/repo"
gguf_file = "toml.gguf"
gguf_revision = "toml-rev"
max_context = 384

[relay]
mode = "disabled"
"""

# The env the seed's test runs that file with.
LAYERING_ENV = {
    "MVP_NODE_PROVIDER": "docker",
    "MVP_NODE_IMAGE": "docker.io/example/from-env:latest",
    "MVP_PROMPT_MAX_TOKENS": "23",
    "MVP_MODEL_ID": "env-model",
    "MVP_IROH_RELAY_MODE": "default",
}

# `toml_vastai_image_overrides_image_node_for_vastai_provider` (vastai-image.toml).
VASTAI_IMAGE_TOML = """
[runtime]
profile = "deploy"

[provider]
kind = "vastai"

[image]
node = "docker.io/example/generic:toml"

[vastai]
image = "docker.io/example/vastai:toml"
api_key = "k"
bootstrap_command = "/run"
"""

WHOLE_MODEL = (
    "this engine (llama.cpp) serves the whole model on one node; pipeline stages are not built"
)
NO_IROH = "mvp-tui reaches nodes over SSH; the seed's iroh relay is not built"
NO_WEB_DASHBOARD = (
    "the seed's web dashboard is not built; run `mvp-tui` for the terminal dashboard "
    "(headless runs print every frame as a JSON line)"
)


def layering_warnings(path: str) -> list[str]:
    """The documented warnings for LAYERING_TOML at `path` with LAYERING_ENV."""
    return [
        f"[runtime] stage_index = 3 from file {path}:6 is accepted and has no effect here: "
        + WHOLE_MODEL,
        f"[runtime] layer_end_exclusive = 24 from file {path}:7 is accepted and has no "
        "effect here: " + WHOLE_MODEL,
        f"[prompt] dashboard = true from file {path}:25 is accepted and has no effect here: "
        + NO_WEB_DASHBOARD,
        "[relay] mode = 'default' from env MVP_IROH_RELAY_MODE is accepted and has no effect "
        "here: " + NO_IROH,
    ]

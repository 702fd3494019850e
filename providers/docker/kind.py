"""Provider docker as the app asks about it (providers/kind.py)."""

from __future__ import annotations

from mvp_tui.node_protocol import BootEnv
from mvp_tui.providers.docker.section import DockerSection
from mvp_tui.providers.kind import ProviderKind

KIND = ProviderKind(
    name="docker",
    title="docker",
    build="mvp_tui.providers.docker.client:build",
    section=DockerSection,
    on_this_machine=True,
    own_image_key="docker.image",
    filters_hint="[docker] gpus",
    # The orchestrator seed's `provider_config` names, and its node spec's GPUs.
    seed_key_names={"gpus": "docker_gpus", "cached_model_host_path": "cached_model"},
    node_spec_env=(BootEnv.env_name("docker_gpus"),),
)

"""The node container as values (no daemon): name, labels, stdin, auto-remove, the bridge
network's published loopback port and host-gateway, GPU device requests, model mounts and
the settings read from the config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mvp_tui.agent_bundle import zip_bytes
from mvp_tui.config import load_config
from mvp_tui.config.loader import flag_dest
from mvp_tui.config.schema import KEYS
from mvp_tui.providers.docker.client import settings_from_config
from mvp_tui.providers.docker.spec import (
    DockerSettings,
    GpuRequest,
    GpuSpecError,
    container_name,
    create_config,
    gpu_request,
    parse_gpus,
    published_url_rewrite,
    stdin_env,
    stdin_env_bytes,
)

LABEL = "mvp-r-0a1b2c3d-1-2"
NODE_ENV = {
    "MVP_RUN_ID": "r-0a1b2c3d",
    "MVP_NODE_PROVIDER": "docker",
    "MVP_GGUF_LOCAL_PATH": "/srv/models/tiny.gguf",
}


def test_bridge_container_spec_matches_the_seed_run() -> None:
    settings = DockerSettings(image="mvp-node:test", gpus="none", network="bridge")
    name, config = create_config(settings, image="mvp-node:test", label=LABEL, request_env=NODE_ENV)
    assert name == "mvp-orchestrator-r-0a1b2c3d-1"  # {prefix}-{run}-{node}
    assert config["Labels"] == {
        "mvp.managed-by": "mvp-tui",
        "mvp.lease": LABEL,
        "mvp.run": "r-0a1b2c3d",
        "mvp.node": "1",
        "mvp.attempt": "2",
    }
    host = config["HostConfig"]
    assert host["AutoRemove"] is True  # --rm
    assert config["OpenStdin"] and config["StdinOnce"] and config["AttachStdin"]  # -i
    assert config["Tty"] is False
    assert host["NetworkMode"] == "bridge"
    assert host["ExtraHosts"] == ["host.docker.internal:host-gateway"]
    # The engine's port is published on loopback only, on a port the daemon picks.
    assert host["PortBindings"] == {"8080/tcp": [{"HostIp": "127.0.0.1"}]}
    assert config["ExposedPorts"] == {"8080/tcp": {}}
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["MVP_ENGINE_PORT"] == "8080"
    assert env["MVP_STDIN_EOF_SHUTDOWN"] == "1"
    assert env["MVP_RUN_ID"] == "r-0a1b2c3d"
    # The model file is mounted read-only and the node's path rewritten to it.
    assert env["MVP_GGUF_LOCAL_PATH"] == "/models/local/tiny.gguf"
    assert host["Mounts"] == [
        {
            "Type": "bind",
            "Source": "/srv/models/tiny.gguf",
            "Target": "/models/local/tiny.gguf",
            "ReadOnly": True,
        }
    ]
    assert "DeviceRequests" not in host
    # On a bridge network the agent's engine listens on every interface of the container,
    # told so in its env: the launcher patches nothing in the agent.
    assert env["MVP_ENGINE_HOST"] == "0.0.0.0"
    assert config["Cmd"][0] == "python3" and "ENGINE_HOST" not in config["Cmd"][2]


def test_host_network_spec_has_no_published_port() -> None:
    settings = DockerSettings(image="i", gpus="none", network="host")
    _, config = create_config(settings, image="i", label=LABEL, request_env=NODE_ENV)
    host = config["HostConfig"]
    assert host["NetworkMode"] == "host"
    assert "PortBindings" not in host and "ExtraHosts" not in host
    assert config["Cmd"][:2] == ["python3", "-c"]  # the launcher reading the agent from stdin
    env = dict(item.split("=", 1) for item in config["Env"])
    assert "MVP_ENGINE_PORT" not in env and "MVP_ENGINE_HOST" not in env


STAND_IN_MAIN = b"""\
import os, sys
ENGINE_HOST = "127.0.0.1"
rest = os.read(0, 100)  # the agent's own stdin reader takes over where the launcher stopped
print(__name__, sys.argv[0], __file__, ENGINE_HOST, rest)
sys.exit(3)
"""
STAND_IN = zip_bytes([("__main__.py", STAND_IN_MAIN)])  # a zipapp, as the real agent is


@pytest.mark.parametrize("network", ["host", "bridge"])
def test_the_launcher_runs_the_agent_sent_down_stdin_and_reads_no_further(network: str) -> None:
    settings = DockerSettings(image="i", gpus="none", network=network)
    _, config = create_config(
        settings, image="i", label=LABEL, request_env=NODE_ENV, agent_bytes=len(STAND_IN)
    )
    env = dict(item.split("=", 1) for item in config["Env"])
    done = subprocess.run(
        [sys.executable, *config["Cmd"][1:]],
        input=STAND_IN + b"shutdown\n",
        env={"MVP_AGENT_BYTES": env["MVP_AGENT_BYTES"]},
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 3, done.stderr  # the agent's own exit code
    # The agent runs as sent, as `python3 agent.pyz` would run it, from a file of its own:
    # its own ENGINE_HOST untouched on either network.
    name, argv0, file, host, rest = done.stdout.decode().split()
    assert (name, host, rest) == ("__main__", "127.0.0.1", "b'shutdown\\n'")
    assert argv0.endswith(".pyz") and file == f"{argv0}/__main__.py"
    assert not Path(argv0).exists()  # removed once the agent ended


def test_the_launcher_says_so_when_stdin_closes_before_the_agent_arrived() -> None:
    settings = DockerSettings(image="i", gpus="none", network="host")
    _, config = create_config(settings, image="i", label=LABEL, request_env=NODE_ENV,
                              agent_bytes=1000)
    done = subprocess.run([sys.executable, *config["Cmd"][1:]], input=b"import os\n",
                          env={"MVP_AGENT_BYTES": "1000"}, capture_output=True, timeout=30,
                          check=False)
    assert done.returncode == 1 and b"stdin closed before the whole agent" in done.stderr


def test_cached_model_wins_and_drops_the_download_source(tmp_path: Path) -> None:
    model = tmp_path / "weights-q4.gguf"
    model.write_bytes(b"GGUF")
    settings = DockerSettings(image="i", gpus="none", network="host", cached_model_host_path=model)
    env = {**NODE_ENV, "MVP_GGUF_REPO": "a/b", "MVP_GGUF_FILE": "c.gguf"}
    del env["MVP_GGUF_LOCAL_PATH"]
    _, config = create_config(settings, image="i", label=LABEL, request_env=env)
    values = dict(item.split("=", 1) for item in config["Env"])
    assert values["MVP_GGUF_LOCAL_PATH"] == "/models/cached/weights-q4.gguf"
    assert "MVP_GGUF_REPO" not in values and "MVP_GGUF_FILE" not in values
    assert config["HostConfig"]["Mounts"] == [
        {
            "Type": "bind",
            "Source": str(model.resolve()),
            "Target": "/models/cached/weights-q4.gguf",
            "ReadOnly": True,
        }
    ]


@pytest.mark.parametrize(
    ("raw", "want", "device"),
    [
        ("all", GpuRequest(count=-1), {"Count": -1, "DeviceIDs": None}),
        ("2", GpuRequest(count=2), {"Count": 2, "DeviceIDs": None}),
        ("device=0,1", GpuRequest(device_ids=("0", "1")), {"Count": 0, "DeviceIDs": ["0", "1"]}),
        ("GPU-3f2a", GpuRequest(device_ids=("GPU-3f2a",)), {"Count": 0, "DeviceIDs": ["GPU-3f2a"]}),
        ("none", GpuRequest(), None),
        ("", GpuRequest(), None),
    ],
)
def test_gpus_forms(raw: str, want: GpuRequest, device: dict[str, object] | None) -> None:
    got = parse_gpus(raw)
    assert got == want
    request = got.device_request()
    if device is None:
        assert request is None
    else:
        assert request is not None and request["Capabilities"] == [["gpu"]]
        assert {k: request[k] for k in device} == device


def test_gpus_device_request_reaches_the_host_config() -> None:
    settings = DockerSettings(image="i", gpus="all", network="host")
    _, config = create_config(settings, image="i", label=LABEL, request_env=NODE_ENV)
    assert config["HostConfig"]["DeviceRequests"] == [
        {"Driver": "", "Capabilities": [["gpu"]], "Count": -1, "DeviceIDs": None}
    ]


def test_bad_gpus_value_names_the_key_and_source() -> None:
    settings = DockerSettings(gpus="some of them", gpus_source="env MVP_DOCKER_GPUS")
    with pytest.raises(
        GpuSpecError, match=r"\[docker\] gpus = 'some of them' \(from env MVP_DOCKER_GPUS\)"
    ):
        gpu_request(settings)


def test_foreign_label_still_gives_a_valid_name() -> None:
    assert container_name("mvp-orchestrator", "x y/z") == "mvp-orchestrator-x-y-z"


def _dest(dotted: str) -> str:
    return flag_dest(next(spec for spec in KEYS if spec.dotted == dotted))


def test_settings_from_config(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    config = load_config(
        env={
            "MVP_NODE_PROVIDER": "docker",
            "MVP_DOCKER_NETWORK": "host",
            "MVP_CACHED_MODEL_HOST_PATH": str(model),
        },
        flags={_dest("docker.gpus"): ("2", "--gpus")},
    )
    settings = settings_from_config(config)
    assert settings.network == "host"
    assert settings.gpus == "2" and settings.gpus_explicit
    assert settings.gpus_source == "flag --gpus"
    assert settings.cached_model_host_path == model
    assert settings.image == "mvp-node:latest"  # [image] node, the fallback
    assert "[image] node" in settings.image_source
    default = settings_from_config(load_config(env={"MVP_NODE_PROVIDER": "docker"}))
    assert default.gpus == "all" and not default.gpus_explicit and default.network == "bridge"


def test_bridge_weights_line_names_the_published_loopback_port() -> None:
    from mvp_tui.node_protocol import frame_line

    rewrite = published_url_rewrite(49153)
    loaded = frame_line(
        "mvp.worker.weights",
        {"type": "WeightsLoaded", "port": 8080, "base_url": "http://0.0.0.0:8080"},
    ).encode()
    payload = json.loads(rewrite(loaded))["payload"]
    assert payload["base_url"] == "http://127.0.0.1:49153"
    assert payload["openai_base_url"] == "http://127.0.0.1:49153/v1"
    assert payload["node_base_url"] == "http://0.0.0.0:8080" and payload["port"] == 8080
    other = frame_line("mvp.node.1.agent", {"type": "NodeAgentPhase"}).encode()
    assert rewrite(other) == other
    assert rewrite(b"not json WeightsLoaded mvp.worker.weights") == (
        b"not json WeightsLoaded mvp.worker.weights"
    )


SECRET_ENV = {**NODE_ENV, "HF_TOKEN": "hf_test0123456789abcdef", "MY_API_KEY": "key-0123456789"}

PRINT_ENV = zip_bytes([("__main__.py", b"""\
import os, sys
print(os.environ.get("HF_TOKEN"), os.environ.get("MY_API_KEY"), os.read(0, 100))
sys.exit(4)
""")])


@pytest.mark.parametrize("network", ["host", "bridge"])
def test_secrets_are_not_in_the_containers_env_but_reach_the_agent_on_stdin(
    network: str,
) -> None:
    settings = DockerSettings(image="i", gpus="none", network=network)
    secrets = stdin_env_bytes(stdin_env(settings, SECRET_ENV))
    _, config = create_config(
        settings, image="i", label=LABEL, request_env=SECRET_ENV,
        agent_bytes=len(PRINT_ENV), stdin_env_length=len(secrets),
    )
    # What `docker inspect` shows: neither the names nor the values.
    shown = json.dumps(config)
    assert "hf_test0123456789abcdef" not in shown and "key-0123456789" not in shown
    assert not any(item.startswith(("HF_TOKEN=", "MY_API_KEY=")) for item in config["Env"])
    env = dict(item.split("=", 1) for item in config["Env"])
    done = subprocess.run(
        [sys.executable, *config["Cmd"][1:]],
        input=PRINT_ENV + secrets + b"shutdown\n",
        env={k: env[k] for k in ("MVP_AGENT_BYTES", "MVP_STDIN_ENV_BYTES")},
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 4, done.stderr
    assert done.stdout.decode().split() == [
        "hf_test0123456789abcdef", "key-0123456789", "b'shutdown\\n'"]


def test_without_secrets_nothing_follows_the_agent() -> None:
    settings = DockerSettings(image="i", gpus="none", network="host")
    assert stdin_env_bytes(stdin_env(settings, NODE_ENV)) == b""
    _, config = create_config(settings, image="i", label=LABEL, request_env=NODE_ENV)
    assert not any(item.startswith("MVP_STDIN_ENV_BYTES=") for item in config["Env"])

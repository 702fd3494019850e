#!/usr/bin/env bash
# Installs and prepares the real peers the tests talk to: an OpenSSH server (started per test
# on a loopback port, never as a system service) and the official vastai CLI in its own venv
# (it pins cryptography, so it stays apart from ours).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv="$here/${MVP_TEST_VENV:-.venv}"  # the venv the tests run in (scripts/test.sh)
if [ ! -x /usr/sbin/sshd ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssh-server >/dev/null
  else
    echo "peers: /usr/sbin/sshd missing; install openssh-server (sshd tests will skip, or fail under CI)" >&2
  fi
fi
# fish: `mvp-tui endpoint --env --shell fish` is read by a real fish in the tests.
if ! command -v fish >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    # A new machine's package lists may be empty: update them once if the install fails.
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q fish >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q fish >/dev/null; }; } ||
      echo "peers: fish not installed (its endpoint test will skip, or fail under CI)" >&2
  else
    echo "peers: fish missing; install it (its endpoint test will skip, or fail under CI)" >&2
  fi
fi
# sshd refuses to start as root without its privilege-separation directory.
[ "$(id -u)" = 0 ] && mkdir -p /run/sshd
# Docker's engine (docker.io, when missing; scripts/test.sh starts a private dockerd per test
# session, never the system service) and the Docker tests' node image, built offline and
# cached under ~/.cache/mvp-tui/docker-image (see tests/docker/image.py).
"$here/scripts/dockerd.sh" install
if [ -x "$venv/bin/python" ]; then
  (cd "$here" && "$venv/bin/python" -m tests.docker.image build) ||
    echo "peers: the Docker test image was not built (is the local extra installed?)" >&2
fi
# llama.cpp's ggml-rpc-server and llama-server (multi-node runs, tests/multinode), built once
# from the pinned llama-cpp-python sdist and cached under ~/.cache/mvp-tui/llama.cpp-<version>.
PYTHON="${PYTHON:-$( [ -x "$venv/bin/python" ] && echo "$venv/bin/python" || echo python3)}" \
  "$here/scripts/llama-rpc-build.sh" ||
  echo "peers: llama.cpp's RPC binaries were not built (multi-node tests will skip, or fail under CI)" >&2
# The oldest Python the node agent supports (docs/providers/index.md, "The node image"): its zipapp is run there
# (tests/agent/test_agent_bundle.py), found on PATH, under pyenv, or at MVP_OLDEST_NODE_PYTHON.
if ! command -v python3.8 >/dev/null 2>&1 && [ -z "${MVP_OLDEST_NODE_PYTHON:-}" ] &&
   ! ls "$HOME"/.pyenv/versions/3.8.*/bin/python3 >/dev/null 2>&1; then
  echo "peers: no Python 3.8 for the agent's oldest-Python test (it will skip, or fail under CI); pyenv install 3.8" >&2
fi
if [ -x "$here/scripts/vastai-cli-venv.sh" ]; then
  "$here/scripts/vastai-cli-venv.sh"
fi

#!/usr/bin/env bash
# A PRIVATE Docker engine for the test session — never the system daemon.
#
#   scripts/dockerd.sh install     install docker.io when dockerd is missing (root, apt-get)
#   scripts/dockerd.sh start [DIR] start dockerd with its socket, data root, exec root and pid
#                                  file under DIR (default: a new temp dir); prints
#                                  `export MVP_TEST_DOCKER_HOST=unix://DIR/docker.sock` and
#                                  `export MVP_TEST_DOCKERD_DIR=DIR` for `eval`
#   scripts/dockerd.sh stop DIR    stop that dockerd (and its containerd), unmount its netns
#                                  mount, delete DIR
#
# This machine's rule: no bridge, no NAT, no forwarding changes, so the daemon runs with
# --bridge=none --iptables=false --ip-forward=false --ip-masq=false (containers use network
# "none" or "host"). The tests read MVP_TEST_DOCKER_HOST, never DOCKER_HOST, so a user's own
# daemon is never used by mistake. Without root and without dockerd, `start` prints nothing
# and exits 0: the Docker tests then skip (or fail under CI=true, naming the fix).
set -euo pipefail

cmd=${1:-}
case "$cmd" in
  install)
    if command -v dockerd >/dev/null 2>&1; then
      exit 0
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "dockerd: installing docker.io (about 20 s)…" >&2
      apt-get update -q >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io >/dev/null
    else
      echo "dockerd: dockerd missing; install docker.io (Docker tests will skip, or fail under CI)" >&2
    fi
    ;;
  start)
    dir=${2:-}
    # containerd's socket lives at <exec-root>/containerd/containerd.sock, and a unix socket
    # path stops at 108 bytes: refuse a dir too deep instead of timing out.
    if [ $(( ${#dir} + 33 )) -ge 108 ]; then
      echo "dockerd: $dir is too long for containerd's socket path; use a short dir (/tmp/…)" >&2
      exit 2
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
      echo "dockerd: dockerd not installed; run scripts/dockerd.sh install as root" >&2
      exit 0
    fi
    if [ "$(id -u)" != 0 ]; then
      echo "dockerd: a private dockerd needs root; Docker tests will skip (or fail under CI)" >&2
      exit 0
    fi
    if [ -z "$dir" ]; then
      dir=$(mktemp -d /tmp/mvp-dockerd.XXXXXX)
    fi
    mkdir -p "$dir"
    sock="$dir/docker.sock"
    # setsid: the daemon is not in the caller's process group, so a ctrl-c of the test run
    # reaches pytest and the trap, and `stop` ends the daemon itself.
    setsid dockerd \
      -H "unix://$sock" \
      --data-root "$dir/data" \
      --exec-root "$dir/exec" \
      --pidfile "$dir/dockerd.pid" \
      --bridge=none --iptables=false --ip-forward=false --ip-masq=false \
      >"$dir/dockerd.log" 2>&1 </dev/null &
    echo $! >"$dir/dockerd.launch.pid"
    # Ready when the API answers (0.3 s here); give up after 30 s with the daemon's log.
    for _ in $(seq 1 300); do
      if [ -S "$sock" ] && docker -H "unix://$sock" version >/dev/null 2>&1; then
        echo "unix://$sock" >"$dir/docker_host"
        echo "export MVP_TEST_DOCKER_HOST=unix://$sock"
        echo "export MVP_TEST_DOCKERD_DIR=$dir"
        exit 0
      fi
      if ! kill -0 "$(cat "$dir/dockerd.launch.pid")" 2>/dev/null; then
        break
      fi
      sleep 0.1
    done
    echo "dockerd: the private dockerd did not come up; its log:" >&2
    tail -n 20 "$dir/dockerd.log" >&2 || true
    "$0" stop "$dir" || true
    exit 1
    ;;
  stop)
    dir=${2:?usage: scripts/dockerd.sh stop DIR}
    [ -d "$dir" ] || exit 0
    pid=""
    [ -f "$dir/dockerd.pid" ] && pid=$(cat "$dir/dockerd.pid")
    [ -z "$pid" ] && [ -f "$dir/dockerd.launch.pid" ] && pid=$(cat "$dir/dockerd.launch.pid")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      # SIGTERM stops the daemon and its containerd child (it stops running containers).
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    # The daemon leaves an nsfs mount at <exec-root>/netns/default (and overlay mounts when
    # killed): unmount everything under DIR, deepest first, before deleting it.
    awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
    rm -rf "$dir"
    ;;
  *)
    echo "usage: scripts/dockerd.sh install | start [DIR] | stop DIR" >&2
    exit 2
    ;;
esac

"""The model prefetch: a few lines of POSIX sh in the instance's start command (Vast
`onstart`, RunPod `args`, after the boot guard) that start fetching the GGUF into the agent's
model cache as soon as the container starts, so the download runs while sshd comes up and
the dashboard logs in, not after.

What it does, and why it stays this small (Vast caps `onstart` at 4096 characters, the
guard takes half):

- runs only when the create env says `MVP_PREFETCH=1`: the engine sets it for a hub model
  when the run has no `HF_TOKEN` (a token never goes into a create request: the provider's
  console shows it; a private repo downloads when the agent arrives, as before);
- reads the model and hub from the create env, the same `MVP_GGUF_*`, `MVP_HF_ENDPOINT` and
  `MVP_MODEL_CACHE_DIR` the agent gets, and lands the bytes in `<cache file>.part`, the very
  file the agent's downloader resumes (`mvp_tui.node.download.model_cache_path`);
- refuses names it would have to quote for a URL (anything beyond `A-Za-z0-9._-/`): the
  agent, which quotes properly, downloads those;
- resumes (curl `-C -`, so a restarted container goes on where it stopped) and writes one
  line to `<cache file>.prefetch`: `<pid> <unix start> curl`. The bytes so far are the
  `.part` file's size; the agent reads both, stops the fetch and adopts the file, checking
  size and digest against the hub's metadata (never trusting this script's bytes blindly).

Installs nothing and needs curl (llama.cpp's server images have it for their health check);
an image without curl gets no prefetch, and the agent downloads as before.
"""

from __future__ import annotations

from mvp_tui.node_protocol import PREFETCH_ENV, PREFETCH_STATE_SUFFIX, AgentEnv

_SCRIPT = """mvp_prefetch() {
[ "${@ENV@:-}" = 1 ] && command -v curl >/dev/null || return 0
o=${MVP_GGUF_REPO:-} r=${MVP_GGUF_REVISION:-main} f=${MVP_GGUF_FILE:-}
case "$o/$f" in *[!A-Za-z0-9._/-]*|*..*|/*|*/|*//*) return 0;; esac
case $r in *[!A-Za-z0-9._-]*|''|.|..) return 0;; esac
d=${MVP_MODEL_CACHE_DIR:-${HOME:-/root}/.cache/mvp-node}/$(echo "$o" | sed 's#/#--#g')/$r/$f
u=${MVP_HF_ENDPOINT:-https://huggingface.co}
[ -e "$d" ] && return 0
mkdir -p "${d%/*}" || return 0
(trap '' HUP; exec curl -fsSL -C - -o "$d.part" "${u%/}/$o/resolve/$r/$f") &
echo "$! $(date +%s) curl" >"$d@SUFFIX@"
}
mvp_prefetch </dev/null >/dev/null 2>&1
"""


def prefetch_script() -> str:
    """The prefetch: a function run at once; its fetch goes on in the background."""
    return _SCRIPT.replace("@ENV@", PREFETCH_ENV).replace("@SUFFIX@", PREFETCH_STATE_SUFFIX)


def wants_prefetch(node_env: dict[str, str]) -> bool:
    """Whether a create with this node env may prefetch: a hub model and no hub token (a
    token stays out of create requests, so a private repo would be refused anyway)."""
    if node_env.get("HF_TOKEN") or node_env.get("HUGGING_FACE_HUB_TOKEN"):
        return False
    repo, local = AgentEnv.env_name("gguf_repo"), AgentEnv.env_name("gguf_local_path")
    return bool(node_env.get(repo)) and not node_env.get(local)

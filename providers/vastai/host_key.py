"""Pinned first contact on Vast.ai: the instance's sshd host key is made here, before create.

Without it the first SSH connection to a Vast lease trusts whatever key answers, and that
connection receives the run's secrets (`run.sh`, the agent's launcher and env: HF_TOKEN; on
a multi-node main, the key to every worker's RPC port). So, as on RunPod:

1. `HostKeyPlan.new()` generates an ed25519 host key; its public half is pinned in the run
   record's placeholder lease before the create is sent (`VastAiProvider.host_key_for`);
2. the private half goes in the create's `env`, base64, cut into `MVP_SSH_HOST_KEY_ED25519_<n>`
   pieces (Vast takes at most 256 characters per variable), never shown (redacted);
3. the instance's `onstart` (`install_script`) writes it over sshd's own ed25519 key, drops
   the other host key types so sshd offers ours alone, and sends sshd a SIGHUP (it re-execs
   and reloads its keys);
4. until the node presents the pinned key the SSH session counts a different key as "not yet"
   (never trusted, nothing sent), within its boot budget (`ssh/session.py`).

Not verified against the live API: that Vast's launch mode keeps the sshd it started alive
through a SIGHUP, and where its pid file lives (the script also finds sshd by name). When
the pinned key never answers, the host fails with the fingerprints named, and
`[vastai] pin_host_key = false` goes back to trust on first use (the Bootstrap row shows the
key that was pinned then).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from mvp_tui.node_protocol import BootEnv

PIECE_PREFIX = BootEnv.env_name("host_key") + "_"
PIECE_CHARS = 250  # Vast: 256 characters per env variable at most
# Where the script writes the key and finds sshd; tests point them at a loopback sshd.
SSH_DIR_ENV = BootEnv.env_name("ssh_dir")  # default /etc/ssh
SSHD_PIDFILE_ENV = BootEnv.env_name("sshd_pidfile")  # default /var/run/sshd.pid
SSH_DIR_DEFAULT = "/etc/ssh"
SSHD_PIDFILE_DEFAULT = "/var/run/sshd.pid"
KEY_NAME = "ssh_host_ed25519_key"
# Left beside the key by a rotation: a restarted instance's onstart (which runs again, with
# the create's env) must not put the pinned key, whose private half Vast keeps, back.
ROTATED_MARK = ".mvp-rotated"


@dataclass(frozen=True, slots=True)
class HostKeyPlan:
    """One instance's host key: the public line to pin, the env pieces that carry the rest."""

    public: str  # OpenSSH public key line
    private_b64: str  # the private key file, base64 (a secret)

    @classmethod
    def new(cls) -> HostKeyPlan:
        import asyncssh  # the SSH layer's library; loaded only when an instance is made

        key = asyncssh.generate_private_key("ssh-ed25519")
        private = base64.b64encode(key.export_private_key("openssh")).decode()
        public = key.export_public_key("openssh").decode().strip()
        return cls(public=public, private_b64=private)

    def env(self) -> dict[str, str]:
        """The create env's pieces, in order from 1."""
        text = self.private_b64
        pieces = [text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)]
        return {f"{PIECE_PREFIX}{n}": piece for n, piece in enumerate(pieces, 1)}


def install_script() -> str:
    """The onstart lines that put the pinned key in place (before the boot guard starts);
    silent when the create carried no key. POSIX sh, base64 from coreutils or busybox.

    Each piece variable is unset as it is read, so the guard, the prefetch and the user's
    onstart (and what they start) do not inherit the key; shell tracing (a user's
    `#!/bin/bash -x`) is off while the pieces are handled and back on after."""
    return f"""\
x=;case $- in *x*)set +x;x=1;esac 2>/dev/null
k= n=1
while q={PIECE_PREFIX}$n;eval "p=\\${{$q:-}}";[ "$p" ];do k=$k$p;unset $q;n=$((n+1));done
d=${{{SSH_DIR_ENV}:-{SSH_DIR_DEFAULT}}};f=$d/{KEY_NAME}
if [ "$k" ]&&[ ! -e "$f{ROTATED_MARK}" ];then
if (umask 077;printf %s "$k"|base64 -d >"$f.mvp")&&mv -f "$f.mvp" "$f";then
rm -f "$d"/ssh_host_*sa_key
s=$(cat "${{{SSHD_PIDFILE_ENV}:-{SSHD_PIDFILE_DEFAULT}}}" 2>/dev/null||pgrep -o -x sshd)
[ "$s" ]&&kill -HUP "$s"
echo "mvp: pinned ssh host key installed" >&2
else echo "mvp: host key not installed in $d" >&2;fi
fi
unset k p n q d f
[ -z "$x" ]||set -x
"""


# Rotation, over the first verified session (the pinned key's private half stays readable in
# Vast's `extra_env` for the instance's life): the node makes a new key itself, so its
# private half never travels; the engine pins it as pending, then the swap puts it in place
# and reloads sshd. Both first check that the key file holds the key this session verified
# (so they never touch a key sshd does not serve). Arguments: the key dir, the verified key
# (`ssh-ed25519 <base64>`), then (swap) sshd's pid file.
_SERVED = f"""\
f=$1/{KEY_NAME};n=$f.mvp-next
command -v ssh-keygen >/dev/null||{{ echo "ssh-keygen is not installed" >&2;exit 3;}}
[ "$(ssh-keygen -y -f "$f" 2>/dev/null|cut -d' ' -f1,2)" = "$2" ]||{{
echo "$f does not hold the key this session verified" >&2;exit 4;}}
"""
ROTATE_MAKE = _SERVED + """\
rm -f "$n" "$n.pub"
(umask 077;ssh-keygen -q -t ed25519 -N '' -C mvp-rotated -f "$n" </dev/null)>/dev/null||exit 5
cat "$n.pub"
"""
ROTATE_SWAP = _SERVED + f"""\
mv -f "$n" "$f"&&mv -f "$n.pub" "$f.pub"&&: >"$f{ROTATED_MARK}"||exit 6
s=$(cat "$3" 2>/dev/null||pgrep -o -x sshd)
[ "$s" ]&&kill -HUP $s||{{ echo "no sshd to reload ($3)" >&2;exit 7;}}
"""

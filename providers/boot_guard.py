"""The boot guard: a few lines of POSIX sh that the instance's own start command runs at
container start (Vast `onstart`, RunPod `args`), so a node that no agent ever reaches still
ends its own bill.

Nothing bounds the bill between create and the agent's start otherwise: the dashboard may be
`kill -9`ed, its laptop may sleep, SSH may never answer, and the node's dead-man's switch
lives in the agent, which only starts over SSH. The guard:

1. writes its verdict to `<dir>/verdict` (`armed <python3|curl> <secs>`, `off`, or
   `failed <why>`), which the agent reads and reports as a Bootstrap row when it starts;
2. waits `MVP_BOOT_GRACE_S` seconds (the engine puts `[limits] boot_grace_mins` there) for
   the agent's stand-down marker `<dir>/attached`, looking once a second;
3. without it, DELETEs its own instance with the instance's own key, through the API base URL
   (checked again here before the key goes anywhere: https, or http to loopback only, and
   nothing but scheme, host, port and path, so no '@', '?' or '#' can move the host)
   the run uses (`MVP_VASTAI_API_URL` / `MVP_RUNPOD_API_URL` in the create env, so it works
   against a test server), a few times with back-off, until the provider answers "gone" in its
   own error shape (an HTML 404 from a wrong URL is not gone). Log lines go to `<dir>/log`.

Shape: POSIX sh, python3 when present else curl, installs nothing. The key reaches python3 or
curl on stdin only (never argv, never a file). Vast caps `onstart` + `args` at 4096
characters, so the script stays small and `vast_onstart` refuses a merged text over the cap.
`<dir>` is `MVP_BOOT_GUARD_DIR`, else /run/mvp-boot-guard (node_protocol.py: the agent
must agree on it).
"""

from __future__ import annotations

from mvp_tui.node.instance_api import GuardTarget  # each provider's, in its node_api.py
from mvp_tui.node_protocol import (
    BOOT_GRACE_ENV,
    BOOT_GUARD_DIR,
    BOOT_GUARD_DIR_ENV,
    BOOT_GUARD_STAND_DOWN_FILE,
    BOOT_GUARD_VERDICT_FILE,
    BootEnv,
)

GRACE_ENV = BOOT_GRACE_ENV  # whole seconds; the engine converts [limits] boot_grace_mins
DEFAULT_GRACE_S = 1200
USER_AGENT = "mvp-boot-guard/1"  # our own: RunPod's Cloudflare blocks generic agents


# The API URL is checked again before the key goes there (the `case` succeeds, so the guard
# refuses, for a character outside a bare URL's or a form other than https or loopback http:
# no '@', '?', '#' or '\\' can make curl or urllib connect to a host the text hides).
# One DELETE, run in the guard's directory: the key arrives on stdin; prints the HTTP status
# (0: no answer) and leaves the body in ./b.
_PYTHON = """import sys,urllib.request as r
a=sys.argv+[""];h={"Authorization":"Bearer "+input(),
"User-Agent":"@UA@","Content-Type":"application/json"}
try:
 x=r.urlopen(r.Request(a[1],a[2].encode() or None,h,method="DELETE"),timeout=30)
 c=x.status;b=x.read()
except r.HTTPError as e:c=e.code;b=e.read()
except Exception as e:c=0;b=str(e).encode()
open("b","wb").write(b[:4096]);print(c)"""

_SCRIPT = """mvp_boot_guard() {
g=${@DIRENV@:-@DIR@}
mkdir -p "$g"&&chmod 700 "$g"&&cd "$g"||return
rm -f @DOWN@ @VERDICT@
l() { echo "$(date) $*" >>log; }
v() { echo "$*" >v.tmp&&mv -f v.tmp @VERDICT@; l "$*"; }
d() { [ -e @DOWN@ ]&&l stood down; }
i=${@ID@:-}
@IDFALLBACK@k=${@KEY@:-}
s=${@GRACE@:-@DEFGRACE@}
u=${@URLENV@:-@URL@}
case $u in *[!0-9A-Za-z.:/_-]*);;https://*|http://127.0.0.1[:/]*|http://localhost[:/]*)false
esac&&{ v failed @URLENV@ is not an https base URL;return;}
u=${u%/}@PATH@
case $i in ''|*[!@IDCHARS@]*) v failed no usable @ID@ in the container env;return;;esac
[ -n "$k" ]||{ v failed no @KEY@ in the container env;return;}
case $s in ''|*[!0-9]*) v failed @GRACE@=$s is not whole seconds;return;;esac
[ "$s" -gt 0 ]||{ v off;return;}
p=$(command -v python3) h=python3
[ -n "$p" ]||{ h=curl; command -v curl >/dev/null; }||{
 v failed this image has neither python3 nor curl;return;}
v armed $h $s
P='@PYTHON@'
n=0 t=0 w=${@RETRYENV@:-@DEFRETRY@}
while [ $n -lt $s ]; do d&&return;sleep 1;n=$((n+1));done
l "no agent in $s s: destroying $i"
while [ $t -lt 8 ]; do
 d&&return
 if [ -n "$p" ]; then r=$(printf %s "$k" | "$p" -c "$P" "$u" @PYBODY@ 2>>log)
 else r=$(printf 'Authorization: Bearer %s\\n' "$k" | curl -sS -m 30 -o b -w '%{http_code}' \\
  -X DELETE -H @- -H 'User-Agent: @UA@' -H 'Content-Type: application/json' @CURLBODY@"$u" 2>>log)
 fi
 l "destroy: HTTP $r"
@RETIRED@ [ "$r" = 404 ]&&grep -Eq '@GONE@' b&&{ l gone;return;}
 sleep $w;[ $w -lt 60 ]&&w=$((w*2));t=$((t+1))
done
l gave up
}
(trap '' HUP; mvp_boot_guard) </dev/null >/dev/null 2>&1 &
"""


def guard_script(target: GuardTarget) -> str:
    """The guard for `target`: a function and its start in the background (a start command
    goes on at once; the guard outlives the shell that started it)."""
    body = target.body
    values = {
        "@DIRENV@": BOOT_GUARD_DIR_ENV,
        "@DIR@": BOOT_GUARD_DIR,
        "@DOWN@": BOOT_GUARD_STAND_DOWN_FILE,
        "@VERDICT@": BOOT_GUARD_VERDICT_FILE,
        "@IDFALLBACK@": target.id_fallback,
        "@ID@": target.id_name,
        "@KEY@": target.key_name,
        "@GRACE@": GRACE_ENV,
        "@RETRYENV@": BootEnv.env_name("guard_retry_s"),
        "@DEFRETRY@": str(BootEnv().guard_retry_s),
        "@DEFGRACE@": str(DEFAULT_GRACE_S),
        "@URLENV@": target.url_env,
        "@URL@": target.default_url,
        "@PATH@": target.path,
        "@IDCHARS@": target.id_chars,
        "@PYTHON@": _PYTHON,
        "@PYBODY@": f"'{body}'" if body else "",
        "@CURLBODY@": f"-d '{body}' " if body else "",
        "@GONE@": target.gone,
        "@RETIRED@": target.retired,
        "@UA@": USER_AGENT,
    }
    text = _SCRIPT
    for name, value in values.items():
        text = text.replace(name, value)
    return text

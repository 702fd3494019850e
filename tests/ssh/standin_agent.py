"""Stand-in for the node agent in the SSH tests (uploaded over SFTP, run with python3).

Behaviour from its env (which arrives in run.sh, never on the command line):
- STANDIN_LINES: print `line 1` .. `line N` on stdout, each written in two pieces so the
  reader sees partial lines; STANDIN_DELAY seconds between lines; `err K` on stderr every
  10th line. Before the lines it prints `ready` and `token-ok` when STANDIN_TOKEN matches
  STANDIN_TOKEN_EXPECTED_SHA (a hash, so the test never needs the value on this side).
- STANDIN_EXIT_FIRST=1: the first run (per run directory) exits 3 at once.
- STANDIN_HOLD=1: after the lines, wait until `shutdown` on stdin or SIGTERM.
- STANDIN_IGNORE_SHUTDOWN=1: ignore `shutdown` and SIGTERM (needs SIGKILL).
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time


def main() -> int:
    env = os.environ
    if env.get("STANDIN_EXIT_FIRST") == "1" and not os.path.exists("first-run-done"):
        with open("first-run-done", "w") as marker:
            marker.write("1")
        sys.stderr.write("standin: failing the first run on purpose\n")
        return 3
    stubborn = env.get("STANDIN_IGNORE_SHUTDOWN") == "1"
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    token = env.get("STANDIN_TOKEN", "")
    if hashlib.sha256(token.encode()).hexdigest() == env.get("STANDIN_TOKEN_EXPECTED_SHA"):
        print("token-ok", flush=True)
    print("ready", flush=True)
    delay = float(env.get("STANDIN_DELAY", "0"))
    for n in range(1, int(env.get("STANDIN_LINES", "0")) + 1):
        sys.stdout.write(f"line {n}")
        sys.stdout.flush()
        sys.stdout.write("\n")
        sys.stdout.flush()
        if n % 10 == 0:
            sys.stderr.write(f"err {n}\n")
            sys.stderr.flush()
        if delay:
            time.sleep(delay)
    if env.get("STANDIN_HOLD") == "1":
        for command in sys.stdin:
            if command.strip() == "shutdown" and not stubborn:
                print("shutting down", flush=True)
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

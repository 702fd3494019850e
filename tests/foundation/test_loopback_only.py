"""The suite's own guard: a child process the tests start cannot look up a name or connect to
an address off loopback, and loopback still works (tests/loopback_only/sitecustomize.py)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import socket, sys
def refused(call):
    try:
        call()
    except OSError as exc:
        return "loopback only" in str(exc)
    return False
assert refused(lambda: socket.getaddrinfo("huggingface.co", 443)), "a lookup left loopback"
assert refused(lambda: socket.create_connection(("198.51.100.7", 53), timeout=1))
assert refused(lambda: socket.socket().connect(("192.0.2.1", 80)))
assert socket.getaddrinfo("localhost", 80) and socket.getaddrinfo("::1", 80)
assert socket.getaddrinfo("mvp-x.localhost", 80)[0][4][0] in ("127.0.0.1", "::1")
server = socket.create_server(("127.0.0.1", 0))
socket.create_connection(server.getsockname(), timeout=5).close()
print("guarded")
"""


def test_a_child_of_the_suite_reaches_loopback_only() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "guarded", done.stderr

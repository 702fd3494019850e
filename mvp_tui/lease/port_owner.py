"""Who holds a local TCP port: read from /proc (Linux), so a taken fixed port can be named
("pid 4242 (python3 -m http.server)", or an mvp-tui run by its endpoint record) instead of
only said to be taken. Best effort: another user's process shows as such; elsewhere, "".
"""

from __future__ import annotations

import os
from pathlib import Path

from mvp_tui.lease.endpoint_record import ENDPOINT_FILE, load_endpoint, process_alive
from mvp_tui.lease.records import RecordStore
from mvp_tui.untrusted import one_line_ascii

_LISTEN = "0A"  # /proc/net/tcp's state column


def port_owner(port: int, state_dir: Path | None = None) -> str:
    """Words naming what listens on 127.0.0.1:`port` (or any address), or ""."""
    run = _mvp_run_on(port, state_dir) if state_dir is not None else ""
    if run:
        return run
    inodes = _listening_inodes(port)
    if not inodes:
        return ""
    for pid in _pids():
        if _holds(pid, inodes):
            return f"pid {pid} ({_command(pid)})"
    return "a process of another user"


def _listening_inodes(port: int) -> set[str]:
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN and fields[1].endswith(f":{port:04X}"):
                found.add(fields[9])
    return found


def _pids() -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        return []


def _holds(pid: int, inodes: set[str]) -> bool:
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for name in names:
        try:
            target = os.readlink(f"{fds}/{name}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return one_line_ascii(raw.replace(b"\0", b" ").decode("utf-8", "replace").strip(), 80)


def _mvp_run_on(port: int, state_dir: Path) -> str:
    """An mvp-tui run whose endpoint record serves on `port` (the fixed port's usual owner)."""
    store = RecordStore(state_dir)
    for path in sorted(store.runs_dir.glob(f"*/{ENDPOINT_FILE}")):
        run_id = path.parent.name
        record = load_endpoint(store, run_id)
        if record is not None and record.serving and record.port == port and process_alive(
            record.pid
        ):
            return f"mvp-tui run {run_id} (`mvp-tui ls`)"
    return ""

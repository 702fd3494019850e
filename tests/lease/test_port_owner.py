"""Who holds a local port: a process by pid and command, or an mvp-tui run by its endpoint
record (what the taken-port words and `mvp-tui endpoint` say)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from mvp_tui.lease.endpoint_record import EndpointRecord, save_endpoint
from mvp_tui.lease.port_owner import port_owner
from mvp_tui.lease.records import RecordStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_listening_socket_is_named_by_its_process() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        said = port_owner(port)
    assert said.startswith(f"pid {os.getpid()} ("), said
    assert port_owner(port) == ""  # closed: nobody holds it


def test_an_mvp_run_serving_there_is_named_by_its_run(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    store.run_dir("r-serving").mkdir(parents=True)
    store.run_dir("r-ended").mkdir(parents=True)
    save_endpoint(store, "r-serving",
                  EndpointRecord(api_key="k", base_url="http://127.0.0.1:8642", serving=True))
    save_endpoint(store, "r-ended",
                  EndpointRecord(api_key="k", base_url="http://127.0.0.1:8643", serving=False))
    assert port_owner(8642, tmp_path) == "mvp-tui run r-serving (`mvp-tui ls`)"
    # A run that no longer serves there is not its owner (nor is anyone, here).
    assert "r-ended" not in port_owner(8643, tmp_path)

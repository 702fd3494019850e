"""The host journal keeps what the engine's own load log said it offloaded (`Offload`, from
the agent's `EngineOffload`): read back, cleaned on the way in and out, absent on lines
written before it; `mvp-tui hosts` shows it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mvp_tui.commands import hosts
from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.lease.host_journal import HostJournal, Offload
from mvp_tui.node_protocol import ENGINE_OFFLOAD, offload_report
from tests.lease.test_host_journal import ESC, outcome

PROVEN = Offload(asked="all", layers=33, total=33,
                 buffers_mib={"CUDA0": 1454.83, "CPU_Mapped": 69.08})


def test_an_attempts_offload_is_read_back(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome(ok=True, offload=PROVEN))
    journal.append(outcome("40002"))  # a CPU node, or one that failed before its engine
    served, failed = journal.read()
    assert served.offload == PROVEN and failed.offload is None
    assert served.offload.summary() == "33/33 layers · CUDA0 1,455 MiB"


def test_the_offload_is_the_agents_record_as_checked() -> None:
    record = {"type": ENGINE_OFFLOAD, "asked": "all", "layers": 0, "layers_total": 33,
              "buffers_mib": {"CPU": 5459.93}, "problem": "0/33 layers …", "allowed": True}
    report = offload_report(record)
    assert report is not None
    kept = Offload.from_report(report)
    assert (kept.layers, kept.total, kept.asked, kept.proven) == (0, 33, "all", False)
    assert kept.summary() == "0/33 layers · no GPU buffer (not proven)"


def test_a_line_from_before_the_offload_reads_as_none(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome(offload=PROVEN))
    line = json.loads(journal.path.read_text())
    del line["offload"]
    journal.path.write_text(json.dumps(line) + "\n")
    (read,) = journal.read()
    assert read.offload is None and journal.corrupt == 0


def test_the_offload_is_cleaned_and_bounded_on_the_way_in_and_out(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path, redact=lambda t: t.replace("hunter2", "[redacted]"))
    many = {f"CUDA{i}": 10.0 for i in range(40)}
    journal.append(outcome(offload=Offload(
        asked="all", layers=-3, total=33,
        buffers_mib={f"{ESC}[31mCUDA0 hunter2": 100.0, "Vulkan0": float("nan"), **many})))
    (read,) = journal.read()
    assert read.offload is not None and read.offload.layers == 0
    assert len(read.offload.buffers_mib) == 16
    names = list(read.offload.buffers_mib)
    assert names[0] == "CUDA0 [redacted]" and "Vulkan0" not in names
    assert ESC not in journal.path.read_text() and "hunter2" not in journal.path.read_text()
    line = json.loads(journal.path.read_text())  # edited by hand
    line["offload"].update(asked="some", buffers_mib={f"{ESC}]52;c;eA==\x07CUDA0": 5.0})
    journal.path.write_text(json.dumps(line) + "\n")
    (edited,) = journal.read()
    assert edited.offload is not None and edited.offload.asked == "?"
    assert list(edited.offload.buffers_mib) == ["CUDA0"]


def test_hosts_shows_what_the_engine_offloaded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    journal = HostJournal(state)
    refused = Offload(asked="all", layers=0, total=3, buffers_mib={"CPU_Mapped": 0.72},
                      proven=False)
    journal.append(outcome("40001", reason="GPU offload not proven: 0/3", offload=refused))
    journal.append(outcome("40002", ok=True, offload=PROVEN, at=outcome().at + 60))
    env = {"MVP_STATE_DIR": str(state)}
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    assert hosts.run(config, argparse.Namespace(json=False, days=None)) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].endswith("ok · offload 33/33 layers · CUDA0 1,455 MiB")
    assert "failed: GPU offload not proven: 0/3 · offload 0/3 layers · no GPU buffer " \
           "(not proven)" in table[2]
    assert hosts.run(config, argparse.Namespace(json=True, days=None)) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["offload"] == {"asked": "all", "layers": 33, "total": 33, "proven": True,
                                  "buffers_mib": {"CUDA0": 1454.83, "CPU_Mapped": 69.08}}
    assert rows[1]["offload"]["proven"] is False

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mvp_tui.lease import (
    AttemptRecord,
    CreateAttemptOutcome,
    LeaseRecord,
    LeaseRecordState,
    RecordError,
    RecordStore,
)
from mvp_tui.lease.atomic import write_atomic
from mvp_tui.lease.records import AgentLogMark
from mvp_tui.providers.base import SshEndpoint


def _filled(store: RecordStore, run_id: str = "r-0a1b") -> None:
    record = store.create_run(
        run_id,
        provider="vastai",
        label_prefix="mvp",
        created_at=100.0,
        config={"vastai": {"api_key": "<redacted>"}, "gpu": "4090"},
    )
    record.attempts.append(
        AttemptRecord(
            label=f"mvp-{run_id}-1-1",
            node_id=1,
            number=1,
            offer_id="1001",
            gpu_name="RTX 4090",
            price_per_hour=0.3,
            started_at=101.0,
            outcome=CreateAttemptOutcome.CREATED,
            answered_at=102.0,
            http_status=200,
            detail="",
            provider_id="7002",
        )
    )
    record.leases.append(
        LeaseRecord(
            provider="vastai",
            label=f"mvp-{run_id}-1-1",
            node_id=1,
            offer_id="1001",
            gpu_name="RTX 4090",
            price_per_hour=0.3,
            state=LeaseRecordState.RUNNING,
            provider_id="7002",
            created_at=102.0,
            running_at=140.0,
            ssh=SshEndpoint("1.2.3.4", 22022, "root", "direct"),
        )
    )
    store.save(record)


def test_a_record_round_trips(store: RecordStore) -> None:
    _filled(store)
    loaded = store.load("r-0a1b")
    assert loaded.run_id == "r-0a1b" and loaded.provider == "vastai"
    assert loaded.config == {"vastai": {"api_key": "<redacted>"}, "gpu": "4090"}
    (attempt,) = loaded.attempts
    assert attempt.outcome is CreateAttemptOutcome.CREATED and attempt.provider_id == "7002"
    (lease,) = loaded.leases
    assert lease.state is LeaseRecordState.RUNNING
    assert lease.ssh == SshEndpoint("1.2.3.4", 22022, "root", "direct")
    store.save(loaded)
    assert store.load("r-0a1b") == loaded
    data = json.loads(store.record_path("r-0a1b").read_text())
    assert data["version"] == 1


def test_records_are_private_files(store: RecordStore) -> None:
    _filled(store)
    assert store.record_path("r-0a1b").stat().st_mode & 0o777 == 0o600
    assert store.run_dir("r-0a1b").stat().st_mode & 0o777 == 0o700


def test_a_crash_before_the_rename_leaves_the_old_record(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _filled(store)
    path = store.record_path("r-0a1b")
    before = path.read_bytes()
    record = store.load("r-0a1b")
    record.leases[0].state = LeaseRecordState.DELETING

    def crash(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space"):
        store.save(record)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert store.load("r-0a1b").leases[0].state is LeaseRecordState.RUNNING
    assert sorted(p.name for p in path.parent.iterdir()) == ["record.json"]  # no temp left


def test_write_atomic_replaces_whole_content(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    write_atomic(target, b"old")
    write_atomic(target, b"new content")
    assert target.read_bytes() == b"new content"


def test_a_corrupt_record_names_the_file(store: RecordStore) -> None:
    _filled(store)
    path = store.record_path("r-0a1b")
    path.write_text('{"version": 1, "run_id": ')
    with pytest.raises(RecordError) as err:
        store.load("r-0a1b")
    assert str(path) in str(err.value)
    assert "not valid JSON" in str(err.value)
    assert "provider's console" in str(err.value)  # the fix


def test_a_bad_field_is_named(store: RecordStore) -> None:
    _filled(store)
    path = store.record_path("r-0a1b")
    data = json.loads(path.read_text())
    data["leases"][0]["state"] = "exploded"
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match=r"\$\.leases\[0\]\.state: .*one of \['creating'"):
        store.load("r-0a1b")
    del data["leases"][0]["label"]
    data["leases"][0]["state"] = "running"
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match=r"\$\.leases\[0\]: .*missing required field `label`"):
        store.load("r-0a1b")


def test_an_unknown_version_is_refused(store: RecordStore) -> None:
    _filled(store)
    path = store.record_path("r-0a1b")
    data = json.loads(path.read_text())
    data["version"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match="version 2 is not supported"):
        store.load("r-0a1b")


def test_open_runs_are_those_with_a_lease_not_confirmed_deleted(store: RecordStore) -> None:
    _filled(store, "r-01")
    _filled(store, "r-02")
    closed = store.load("r-02")
    closed.leases[0].state = LeaseRecordState.DELETED
    store.save(closed)
    store.create_run("r-03", provider="vastai", label_prefix="mvp", created_at=1.0)
    assert [r.run_id for r in store.open_runs()] == ["r-01"]
    store.record_path("r-03").write_text("garbage")
    with pytest.raises(RecordError, match="r-03"):
        store.open_runs()  # a corrupt record could hide a billing lease: never skipped silently
    scan = store.scan()
    assert len(scan.runs) == 2 and len(scan.errors) == 1


def test_a_missing_record_says_so(store: RecordStore) -> None:
    with pytest.raises(RecordError, match="no such record"):
        store.load("r-404")


def test_a_run_id_is_created_once(store: RecordStore) -> None:
    store.create_run("r-01", provider="vastai", label_prefix="mvp", created_at=1.0)
    with pytest.raises(RecordError, match="exists already"):
        store.create_run("r-01", provider="vastai", label_prefix="mvp", created_at=1.0)


def test_host_keys_are_pinned_per_lease(store: RecordStore) -> None:
    _filled(store)
    assert store.pinned_host_key("r-0a1b", "7002") is None
    store.pin_host_key("r-0a1b", "7002", "ssh-ed25519 AAAAC3Nza host\n")
    assert store.pinned_host_key("r-0a1b", "7002") == "ssh-ed25519 AAAAC3Nza host"
    with pytest.raises(RecordError, match="no lease with provider id '9999'"):
        store.pin_host_key("r-0a1b", "9999", "ssh-ed25519 AAAA")


def test_record_pins_adapt_the_ssh_layers_protocol(store: RecordStore) -> None:
    from mvp_tui.lease import RecordPins
    from mvp_tui.ssh.hostkeys import HostKeyPins

    _filled(store)
    pins: HostKeyPins = RecordPins(store, "r-0a1b")
    assert pins.get("vastai:7002") is None
    pins.pin("vastai:7002", "ssh-ed25519 AAAAC3Nza")
    assert pins.get("7002") == "ssh-ed25519 AAAAC3Nza"
    assert RecordStore(store.state_dir).pinned_host_key("r-0a1b", "7002") == "ssh-ed25519 AAAAC3Nza"


def test_a_rotations_pending_key_is_durable_and_settles_in_one_write(store: RecordStore) -> None:
    """A rotation notes its new key before the node swaps it in: a new process (a crash in
    between) still knows both, and settling pins the new one and forgets the pending."""
    from mvp_tui.lease import RecordPins

    _filled(store)
    pins = RecordPins(store, "r-0a1b")
    pins.pin("vastai:7002", "ssh-ed25519 AAAAold")
    pins.propose("vastai:7002", "ssh-ed25519 AAAAnew\n")
    reread = RecordPins(RecordStore(store.state_dir), "r-0a1b")
    assert (reread.get("7002"), reread.pending("7002")) == ("ssh-ed25519 AAAAold",
                                                           "ssh-ed25519 AAAAnew")
    doc = json.loads(store.record_path("r-0a1b").read_text())
    assert doc["leases"][0]["host_key_pending"] == "ssh-ed25519 AAAAnew"
    reread.settle("7002", "ssh-ed25519 AAAAnew")
    assert (pins.get("7002"), pins.pending("7002")) == ("ssh-ed25519 AAAAnew", None)
    pins.propose("7002", "ssh-ed25519 AAAAnext")
    pins.propose("7002", None)
    assert pins.pending("7002") is None


def test_agent_log_mark_round_trips_and_older_records_have_none(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    _filled(store)
    assert store.load("r-0a1b").leases[0].log_positions is None  # a record without the mark
    store.mark_agent_log("r-0a1b", "7002", AgentLogMark(4096, 17), '{"type":"WeightsLoaded"}')
    lease = RecordStore(tmp_path).load("r-0a1b").leases[0]
    assert lease.log_positions == AgentLogMark(4096, 17)
    assert lease.ready_record == '{"type":"WeightsLoaded"}'
    doc = json.loads(store.record_path("r-0a1b").read_text())
    assert doc["leases"][0]["log_positions"] == {"stdout": 4096, "stderr": 17}  # the disk shape
    doc["leases"][0]["log_positions"] = {"stdout": "x", "stderr": 0}
    store.record_path("r-0a1b").write_text(json.dumps(doc))
    with pytest.raises(RecordError, match=r"leases\[0\]\.log_positions\.stdout"):
        store.load("r-0a1b")


def test_a_records_secrets_round_trip_and_an_older_record_has_none(store: RecordStore) -> None:
    """The attempt's secret (RunPod's host key): name, id and state, never a value; a record
    written before secrets existed loads with none."""
    from mvp_tui.lease.records import SecretRecord, SecretState

    _filled(store)
    record = store.load("r-0a1b")
    data = json.loads(store.record_path("r-0a1b").read_text())
    assert data["secrets"] == []
    del data["secrets"]
    store.record_path("r-0a1b").write_text(json.dumps(data))
    assert store.load("r-0a1b").secrets == []
    record.secrets.append(
        SecretRecord("mvp-r-0a1b-1-1", "mvp_host_key_x", SecretState.STORED, "sec1", "")
    )
    store.save(record)
    (secret,) = store.load("r-0a1b").secrets
    assert secret == record.secrets[0] and secret.deletable and secret.may_remain
    assert not SecretRecord("l", "n", SecretState.UNKNOWN).deletable

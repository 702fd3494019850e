"""The dashboard's exit receipt, made from the runs' records once each is settled: the
ledger's lines, then what the provider's account showed after the teardown; its exit code
follows its words (exit 0 only when nothing of the runs may bill)."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.engine.controller import StopResult
from mvp_tui.lease.account_check import AccountCheck, Held
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordStore
from mvp_tui.providers.base import KeptVolume
from mvp_tui.tui.dashboard import exit_receipt

T0 = 1_764_504_180.0
RUN = "r-7f3a"


def recorded(tmp_path: Path, state: LeaseRecordState, check: AccountCheck | None) -> None:
    store = RecordStore(tmp_path)
    record = store.create_run(RUN, provider="runpod", label_prefix="mvp", created_at=T0,
                              config={})
    record.leases.append(LeaseRecord(
        provider="runpod", label="mvp-1-1-1", node_id=1, offer_id="g", gpu_name="RTX 4090",
        price_per_hour=0.69, state=state, provider_id="pod1", created_at=T0,
        deleted_at=T0 + 600 if state is LeaseRecordState.DELETED else None,
        deleted_by="mvp-tui", billed_usd=0.12 if state is LeaseRecordState.DELETED else None,
    ))
    record.account_check = check.to_json() if check is not None else None
    store.save(record)


def test_the_receipt_says_what_the_account_showed(tmp_path: Path) -> None:
    check = AccountCheck(
        provider="runpod", listed=True, run_id=RUN, prefix="mvp",
        destroyed=(Held("pod9", "mvp-1-1-2", RUN, "EXITED"),),
        kept=(KeptVolume("vol1", "mvp-models", 50, 3.5),),
    )
    recorded(tmp_path, LeaseRecordState.DELETED, check)
    receipt = exit_receipt([(tmp_path, RUN)], [StopResult(account=check)], T0 + 900)
    assert receipt.lines[0] == (
        "lease pod1 (runpod, RTX 4090): destroyed, confirmed by the provider · 0:10:00 · "
        "$0.1150 (billed $0.1200)")
    assert receipt.lines[1] == f"run {RUN}: 1 lease · $0.1150 (billed $0.1200) · nothing bills"
    rest = "\n".join(receipt.lines[2:])
    assert "account checked (runpod): nothing of run r-7f3a remains" in rest
    assert "pod9" in rest and "EXITED" in rest  # found after the teardown, destroyed
    assert "volume mvp-models (vol1) kept: $3.50/month" in rest
    assert not receipt.may_bill


def test_an_account_not_listed_is_not_called_nothing_bills(tmp_path: Path) -> None:
    check = AccountCheck(provider="runpod", listed=False, run_id=RUN, prefix="mvp",
                         error="HTTP 503 from the provider")
    recorded(tmp_path, LeaseRecordState.DELETED, check)
    receipt = exit_receipt([(tmp_path, RUN)], [StopResult(account=check)], T0 + 900)
    assert "nothing bills" not in "\n".join(receipt.lines)
    assert receipt.lines[1].endswith("every delete confirmed (account not checked)")
    assert receipt.lines[2].startswith("warning: account not checked (runpod): HTTP 503")
    assert not receipt.may_bill  # each delete was confirmed by its id: exit 0, with the warning


def test_a_kept_lease_bills_and_the_receipt_says_so(tmp_path: Path) -> None:
    recorded(tmp_path, LeaseRecordState.RUNNING, None)
    receipt = exit_receipt([(tmp_path, RUN)], [StopResult(kept=True)], T0 + 3600)
    assert receipt.lines == [
        "lease pod1 (runpod, RTX 4090): KEPT RUNNING, still bills $0.690/h · 1:00:00 · "
        f"$0.6900 so far; end it with `mvp-tui down {RUN}`",
        f"run {RUN}: 1 lease · $0.6900 · 1 may still bill",
    ]
    assert receipt.may_bill

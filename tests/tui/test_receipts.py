"""The receipt the dashboard prints on exit, from lease events: a line per lease it held
(destroyed and confirmed, kept, or not confirmed) and the run's total."""

from __future__ import annotations

from mvp_tui.lease import events as ev
from mvp_tui.tui.receipts import LeaseReceipts

T0 = 1_764_504_180.0


def held(receipts: LeaseReceipts, provider_id: str, label: str, gpu: str, price: float) -> None:
    receipts.handle(ev.AttemptStarted(at=T0, run_id="r-7f3a", label=label, offer_id="1",
                                      gpu_name=gpu, price_per_hour=price, attempt=1), "vastai")
    receipts.handle(ev.AttemptAnswered(at=T0, run_id="r-7f3a", label=label, offer_id="1",
                                       outcome="created", http_status=200, detail="",
                                       provider_id=provider_id), "vastai")
    receipts.handle(ev.LeaseRunning(at=T0 + 5, run_id="r-7f3a", provider_id=provider_id,
                                    label=label, host="h", port=22, user="root", via="direct",
                                    after_s=5, price_per_hour=price), "vastai")


def test_each_lease_and_the_total() -> None:
    receipts = LeaseReceipts()
    assert receipts.lines(T0) == []
    held(receipts, "8001", "mvp-a-0-1", "RTX 4090", 0.26)
    receipts.handle(ev.LeaseDeleted(at=T0 + 25, run_id="r-7f3a", provider_id="8001",
                                    uptime_s=25, spend_usd=0.0018, billed_usd=0.0018), "vastai")
    held(receipts, "8002", "mvp-a-0-2", "RTX 3090", 0.30)
    receipts.handle(ev.LeaseDeleteUnconfirmed(at=T0 + 30, run_id="r-7f3a", provider_id="8002",
                                              reason="timeout"), "vastai")
    assert receipts.lines(T0 + 70) == [
        "lease 8001 (vastai, RTX 4090): destroyed, confirmed by the provider · 0:00:25 · "
        "$0.0018 (billed $0.0018)",
        "lease 8002 (vastai, RTX 3090): teardown NOT confirmed, still bills $0.300/h · "
        "0:01:10 · $0.0058 so far; end it with `mvp-tui down r-7f3a`",
        "run r-7f3a: 2 leases · $0.0076 · 1 may still bill",
    ]
    assert receipts.named == {"8001", "8002"}


def test_provider_text_is_cleaned() -> None:
    receipts = LeaseReceipts()
    held(receipts, "8003", "mvp-a-0-3", "RTX\x1b[31m 4090\n", 0.3)
    (line, _total) = receipts.lines(T0 + 10)
    assert "\x1b" not in line and "\n" not in line and "RTX" in line

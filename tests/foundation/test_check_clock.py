"""`mvp-tui check`'s clock: this machine's time against a provider's Date header."""

from __future__ import annotations

from email.utils import formatdate

from mvp_tui.preflight.accounts import AccountRead, clock_check, server_time
from mvp_tui.preflight.outcome import Check, CheckStatus

NOW = 1_800_000_000.0
ANSWERED = Check.ok("vastai key", "works")


def read(header: str | None, local_at: float = NOW) -> AccountRead:
    return AccountRead("vastai", ANSWERED, None, (header, local_at) if header else None)


def test_a_date_header_reads_as_unix_time() -> None:
    assert server_time(formatdate(NOW, usegmt=True)) == NOW
    assert server_time("Thu, 15 Jan 2027 08:00:00 -0000") is not None  # no zone: UTC
    assert server_time("yesterday, more or less") is None


def test_within_a_minute_passes_and_beyond_fails_with_the_fix() -> None:
    close = clock_check([read(formatdate(NOW - 30, usegmt=True))])
    assert close.status is CheckStatus.OK and "30 s of Vast.ai's clock" in close.detail
    ahead = clock_check([read(formatdate(NOW - 61, usegmt=True))])
    assert ahead.status is CheckStatus.FAILED and "61 s ahead of Vast.ai's" in ahead.detail
    assert "timedatectl set-ntp true" in ahead.fix
    behind = clock_check([read(formatdate(NOW + 3600, usegmt=True))])
    assert behind.status is CheckStatus.FAILED and "3600 s behind" in behind.detail


def test_no_provider_read_skips_and_a_bad_header_is_passed_over() -> None:
    assert clock_check([]).status is CheckStatus.SKIPPED
    assert clock_check([read(None)]).status is CheckStatus.SKIPPED
    assert clock_check([read("not a date")]).status is CheckStatus.SKIPPED
    later = AccountRead("runpod", ANSWERED, None, (formatdate(NOW, usegmt=True), NOW))
    assert "RunPod's" in clock_check([read("not a date"), later]).detail

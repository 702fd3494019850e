"""Whose is a listed instance (`lease/ownership.py`): the rule every sweep follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.lease.ownership import Holdings, Stranger, Whose, claim, strangers_lines
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordStore
from mvp_tui.providers.base import LeaseState, LeaseStatus

TAG = "a1b2c3d4e5"


def _status(label: str, provider_id: str = "9") -> LeaseStatus:
    return LeaseStatus(provider_id, label, LeaseState.RUNNING, "running", price_per_hour=0.3,
                       started_at=1000.0)


def _holdings(store: RecordStore) -> Holdings:
    record = store.create_run("41", provider="vastai", label_prefix="mvp", created_at=1.0)
    record.leases += [
        LeaseRecord(provider="vastai", label="mvp-41-0-1", node_id=0, offer_id="1",
                    gpu_name="g", price_per_hour=0.3, state=LeaseRecordState.RUNNING,
                    provider_id="7001", created_at=2.0),
        LeaseRecord(provider="vastai", label="mvp-41-0-2", node_id=0, offer_id="1",
                    gpu_name="g", price_per_hour=0.3, state=LeaseRecordState.UNKNOWN),
    ]
    store.save(record)
    return Holdings.of(store.scan().runs, "vastai")


@pytest.mark.parametrize(
    ("label", "provider_id", "whose", "run"),
    [
        ("mvp-41-0-1", "7001", Whose.RECORDED, "41"),  # held by its id
        ("mvp-41-0-2", "7002", Whose.RECORDED, "41"),  # an unanswered create, by its label
        ("mvp-41-0-1", "8001", Whose.STRANGER, ""),  # another machine's same label, not ours
        (f"mvp-{TAG}-41-0-9", "7003", Whose.TAGGED, "41"),
        (f"mvp-{TAG}-r-0000aaaa-0-1", "7004", Whose.TAGGED, "r-0000aaaa"),
        ("mvp-0f0f0f0f0f-41-0-1", "7005", Whose.STRANGER, ""),
        ("mvp-2024-01-15", "7006", Whose.STRANGER, ""),
        ("mvp-r-prod-0-0", "7007", Whose.STRANGER, ""),
        ("mvp-notes", "7008", Whose.STRANGER, ""),
        (f"mvp-{TAG}-r-1-0-\u0661", "7009", Whose.STRANGER, ""),
    ],
)
def test_only_a_record_here_or_this_install_s_tag_makes_it_ours(
    tmp_path: Path, label: str, provider_id: str, whose: Whose, run: str
) -> None:
    got = claim(_status(label, provider_id), "mvp", TAG, _holdings(RecordStore(tmp_path)))
    assert (got.whose, got.run_id) == (whose, run)


def test_an_unknown_tag_claims_nothing_by_shape() -> None:
    """A tag that could not be read ("") never makes an untagged label ours."""
    got = claim(_status("mvp-41-0-1"), "mvp", "", Holdings({}, {}))
    assert got.whose is Whose.STRANGER


def test_a_stranger_s_line_is_plain_cleaned_text_with_its_command() -> None:
    label = "mvp-2024-01-15\x1b]52;c;ZXZpbA==\x07[bold red]x[/]\x1b[2J"
    stranger = Stranger.of("vastai", _status(label, "8123"), "not ours", now=1000.0 + 7260)
    (head, line) = strangers_lines([stranger])
    assert head.startswith("1 instance named like mvp-tui runs was not made here")
    assert "\x1b" not in line and "\x07" not in line
    assert "$0.300/h" in line and "age 2h01m" in line and "running" in line
    assert line.endswith("end it with `mvp-tui down --instance vastai:8123`")
    assert Stranger.from_json(stranger.to_json()) == stranger


def test_mvp_tui_config_shows_the_install_tag_it_keeps(tmp_path: Path) -> None:
    from mvp_tui.install_tag import TAG_FILE, kept_tag
    from tests.e2e.test_vast_headless import cli

    env = {"MVP_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    shown = cli("config", env=env)
    tag = kept_tag(tmp_path / "state")
    assert shown.returncode == 0 and tag is not None
    assert f"# install tag: {tag} (kept in {tmp_path / 'state' / TAG_FILE})" in shown.stdout
    assert cli("config", env=env).stdout == shown.stdout, "made once, then kept"
    configured = cli("config", env={**env, "MVP_LEASE_OWNER_TAG": "mymachines"})
    assert "# install tag: mymachines (from [lease] owner_tag)" in configured.stdout

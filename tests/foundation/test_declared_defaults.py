"""A settings object built without a config has the declared defaults of its keys, and its
docstring states no figure of its own (issue 24: it said 60 s for a delete, the key's
default is 120 s)."""

from __future__ import annotations

from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.lease.settings import WalkSettings


def test_the_walk_defaults_are_the_lease_keys_defaults() -> None:
    walk = WalkSettings()
    assert walk.delete_timeout_s == BY_DOTTED["lease.delete_timeout_secs"].default == 120.0
    assert walk.ready_timeout_s == BY_DOTTED["lease.ready_timeout_secs"].default
    assert list(walk.reconcile_waits_s) == BY_DOTTED["lease.reconcile_waits_secs"].default
    assert walk.label_prefix == BY_DOTTED["lease.label_prefix"].default


def test_the_walk_docstring_names_no_figure_of_its_own() -> None:
    doc = WalkSettings.__doc__ or ""
    assert "60 s" not in doc and "[lease]" in doc

"""Host keys pinned in the run record: the adapter the SSH layer's `HostKeyPins` expects.

`RecordPins(store, run_id)` has `get(lease_key)` / `pin(lease_key, key)`, where `lease_key`
is the provider id, optionally prefixed by the provider name ("vastai:7002"). A pin is
durable when `pin` returns (the record is written atomically, with fsync).
"""

from __future__ import annotations

from mvp_tui.lease.records import RecordStore


class RecordPins:
    """Pinned host keys of one run's leases, kept in its run record."""

    def __init__(self, store: RecordStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id

    @staticmethod
    def provider_id(lease_key: str) -> str:
        """ "vastai:7002" → "7002"; a bare provider id is taken as it is."""
        return lease_key.rsplit(":", 1)[-1]

    def get(self, lease_key: str) -> str | None:
        return self.store.pinned_host_key(self.run_id, self.provider_id(lease_key))

    def pin(self, lease_key: str, key_openssh: str) -> None:
        self.store.pin_host_key(self.run_id, self.provider_id(lease_key), key_openssh)

    def pending(self, lease_key: str) -> str | None:
        return self.store.pending_host_key(self.run_id, self.provider_id(lease_key))

    def propose(self, lease_key: str, key_openssh: str | None) -> None:
        self.store.propose_host_key(self.run_id, self.provider_id(lease_key), key_openssh)

    def settle(self, lease_key: str, key_openssh: str) -> None:
        self.store.settle_host_key(self.run_id, self.provider_id(lease_key), key_openssh)

"""[lease]: how the lease walk waits, retries and remembers failed hosts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mvp_tui.config.spec import Section, key


@dataclass(frozen=True)
class LeaseSection(Section):
    """[lease]: the lease walk's labels, waits, attempts and host memory."""

    NAME: ClassVar[str] = "lease"

    label_prefix: str = key(
        "mvp", "prefix of every instance label: PREFIX-TAG-RUN-NODE-ATTEMPT",
        env="MVP_LEASE_LABEL_PREFIX", flag="--label-prefix",
    )
    owner_tag: str | None = key(
        None,
        (
            "this install's tag, carried by every label (PREFIX-TAG-RUN-NODE-ATTEMPT): sweeps "
            "destroy only what carries it or what a run record here holds. Unset: a random tag "
            "made once and kept in the state dir (file owner_tag; `mvp-tui config` shows it). "
            "Set the same 6-16 lowercase letters or digits on each of your machines to share "
            "one identity"
        ),
        env="MVP_LEASE_OWNER_TAG", flag="--owner-tag", example="a1b2c3d4e5",
    )
    reconcile_waits_secs: tuple[float, ...] = key(
        (5.0, 15.0),
        (
            "after an unclear create, look the instance up by label after each of these waits "
            "(seconds; at least one: an instance that may bill is always looked for)"
        ),
        env="MVP_LEASE_RECONCILE_WAITS_SECS", flag="--reconcile-waits-secs", minimum=0,
        min_items=1,
    )
    ready_timeout_secs: float = key(
        900.0,
        (
            "a created instance not running with SSH by then is destroyed and the next offer "
            "tried"
        ),
        env="MVP_LEASE_READY_TIMEOUT_SECS", flag="--ready-timeout-secs", minimum=1,
    )
    delete_timeout_secs: float = key(
        120.0,
        (
            "how long to wait for the provider to confirm a delete before reporting it "
            "unconfirmed"
        ),
        env="MVP_LEASE_DELETE_TIMEOUT_SECS", flag="--delete-timeout-secs", minimum=1,
    )
    destroy_backoff_secs: float = key(
        1.0,
        (
            "the wait after a refused destroy before asking again (doubles each time, up to "
            "16x this); after 6 refusals the delete is reported unconfirmed"
        ),
        env="MVP_LEASE_DESTROY_BACKOFF_SECS", flag="--destroy-backoff-secs", above=0,
    )
    max_attempts: int = key(
        5,
        (
            "Enter without picks tries the focused offer, then the next ones in the board's sort "
            "order, up to this many offers"
        ),
        env="MVP_LEASE_MAX_ATTEMPTS", flag="--max-attempts", minimum=1,
    )
    on_node_loss: str = key(
        "replace",
        (
            "a node that dies (before or while serving) is destroyed, confirmed, and the next "
            "offer brought up in its place ('replace'), or the run stops ('stop')"
        ),
        env="MVP_LEASE_ON_NODE_LOSS", flag="--on-node-loss", choices=("replace", "stop"),
    )
    same_failure_limit: int = key(
        3,
        (
            "the same host failure on this many hosts in a row stops the run (it is not the "
            "hosts)"
        ),
        env="MVP_LEASE_SAME_FAILURE_LIMIT", flag="--same-failure-limit", minimum=1,
    )
    avoid_failed_hosts_days: float = key(
        7.0,
        (
            "offers on a host where an attempt failed within this many days are badged and tried "
            "after the others (still pickable by hand); 0 = no host memory"
        ),
        env="MVP_LEASE_AVOID_FAILED_HOSTS_DAYS", flag="--avoid-failed-hosts-days", minimum=0,
    )

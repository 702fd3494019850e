"""The walk's fixed failure texts, in the seed's words (seed 003 `no_capacity`, `after_failure`).

The wording is the client's own; the provider's text (cleaned and redacted by the walk) is
kept only as the detail after it, so a reader always sees the same sentence for the same case.
"""

from __future__ import annotations

from collections.abc import Sequence

from mvp_tui.providers.registry import spans_hosts, title

# Providers whose offers are GPU types walked in order (`[runpod] gpu_types`, their kind's
# `offer_spans_hosts`): the seed's "gpu_types entry" wording fits them; the others keep "offer".


def no_capacity(
    provider: str, not_ready: Sequence[str], unplaceable: str | None, misses: Sequence[str]
) -> str:
    """Every offer was tried. `not_ready`: why each created lease never became ready, in
    order; `unplaceable`: the last capacity (or 403) answer's detail; `misses`: every miss,
    for providers without the seed's wording."""
    if not spans_hosts(provider):
        tried = "; ".join(misses) or "every offer was over the price cap"
        return f"no offer gave a running lease: {tried}"
    if not not_ready:
        if unplaceable:
            return f"no gpu_types entry could be placed: {unplaceable}"
        return "no gpu_types entry could be placed"
    pods = "1 pod was" if len(not_ready) == 1 else f"{len(not_ready)} pods were"
    because = f", the last one because {not_ready[-1]}" if not_ready[-1] else ""
    text = f"no gpu_types entry gave a ready pod: {pods} created but never became ready{because}"
    if unplaceable:
        text += f"; the other types could not be placed: {unplaceable}"
    return text


def unclear_warning(provider: str, labels: Sequence[str]) -> str:
    """After a failed walk with creates that got no clear answer (the seed's warning)."""
    what = "a pod" if spans_hosts(provider) else "an instance"
    name = provider_name(provider)
    return (
        f"the create calls {', '.join(labels)} got no clear answer from {name}: {what} may "
        "still appear; check `mvp-tui ls`"
    )


def provider_name(provider: str) -> str:
    """A provider's name as its users write it."""
    return title(provider)


def api_failing(provider: str, provider_id: str, failures: int, last_error: str) -> tuple[str, str]:
    """(reason, fix) when the provider's API failed `failures` reads of a lease in a row
    while it came up (seed 003 `Wait::Failed`: the attempt ends, the lease is deleted)."""
    name = provider_name(provider)
    return (
        f"the {name} API failed {failures} reads of lease {provider_id} in a row while it "
        f"came up (last error: {last_error}); the attempt ends here rather than wait out "
        "its budget",
        f"check {name}'s status page and this machine's network, then run again; "
        "`mvp-tui ls` shows whether anything still bills",
    )

"""What a provider declares about itself: one `ProviderKind` per provider package
(`providers/<name>/kind.py`), read through the registry (providers/registry.py).

Everything outside `providers/` that once compared a provider's name asks its kind instead:
a capability flag, a text, a key. A kind is a declaration, so it lives in the base layer
(ARCHITECTURE.md "Layers"): the standard library and the config's declarations only, so the
config can read the provider sections without loading any client. The client is named by
`build` as an entry point ("module:function"), imported only when a run or the board first
builds one (mvp_tui/engine/provider_factory.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mvp_tui.config.spec import Section


@dataclass(frozen=True, slots=True)
class ProviderKind:
    """One provider, as the rest of the app asks about it."""

    name: str  # `[provider] kind`, the records' provider field, the board's column
    title: str  # as its users write it ("Vast.ai")
    # The client's factory as "module:function", called with (config, on_line) and returning
    # a `providers.base.Provider` (a ConfigError when a key it needs is missing).
    build: str
    section: type[Section] | None = None  # its `[section]`, read only when it runs
    # Rents a machine by the hour: a deadline by default, a public image, a confirm before
    # create, and `down --all` asks its account for what this app left behind.
    rented: bool = False
    # The node runs on this machine (a child process, a container): nothing bills, the
    # board always asks it, and a multi-node cluster may run there.
    on_this_machine: bool = False
    board: bool = True  # on the offer board
    # The env variable the board names when its API key is missing ("" = needs none).
    api_key_env: str = ""
    key_page: str = ""  # where a user makes an API key (`mvp-tui check`)
    key_url: str = ""  # the same as a link (the missing key's error)
    # Dotted keys of its own section that the shared code reads ("" = it has none):
    api_key_key: str = ""  # its API key (secret)
    api_key_file_key: str = ""  # a file holding its API key (used unless the key is set)
    ssh_identity_key: str = ""  # the SSH identity for its nodes
    api_url_key: str = ""  # the API base URL, which the node's switch uses too
    confirm_key: str = ""  # a bool: ask before renting (unset: always ask when rented)
    image_key: str = ""  # a node image that wins over `[image] node` (rented nodes)
    own_image_key: str = ""  # the image its own runs record (a container's)
    poll_key: str = ""  # seconds between lease status polls
    lease_noun: str = "instance"  # what one lease is called ("pod")
    seed_name: str = ""  # the orchestrator seed's name for it in its lines ("VastAI")
    filters_hint: str = ""  # where its offer filters live, for a "no offer" hint
    # An offer is a GPU type placed on any of several hosts (RunPod's data centers), not one
    # host: its host memory keys and the walk's wording ("gpu_types entry", "pod") follow.
    offer_spans_hosts: bool = False
    # The seed's `provider_config` names for some of its keys (Docker's `docker_gpus`...).
    seed_key_names: Mapping[str, str] = field(default_factory=dict)
    # Node env names its node's spec carries besides the shared ones (the seed's node_spec).
    node_spec_env: tuple[str, ...] = ()
    # The node is a child process of this app: it reads this machine's files and engine
    # (`check` wants a local engine, `check --live` a local model) and serves on
    # `[prompt] openai_port` itself (no forward carries it).
    child_process: bool = False
    # An answer text meaning a network filter blocked the request, not the key (Cloudflare).
    blocked_marker: str = ""

    @property
    def billing(self) -> bool:
        """Whether leasing bills (asks first); machines here never do."""
        return not self.on_this_machine

    @property
    def ssh(self) -> bool:
        """Whether its nodes are reached over SSH."""
        return bool(self.ssh_identity_key)

    @property
    def entry(self) -> tuple[str, str]:
        """`build` as (module, function)."""
        module, _, function = self.build.partition(":")
        return module, function

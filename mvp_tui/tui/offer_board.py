"""One offer board across providers: every configured provider searched at once.

The run's own provider is searched through its engine (the search is an engine event and
a bootstrap phase); the others through clients built here from the same configuration
(`Config.for_provider`: the same file, env and flags). A provider without credentials is
not asked: the board says "not configured" and names the key to set. One that fails says
why in the pane's footer; the others' offers stay on the board.

No Textual here: the app shows what `search` returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from mvp_tui.config import Config, ConfigError
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.outlook import Outlook, outlook_for
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.engine.settings import selection_policy
from mvp_tui.lease.host_journal import HostMemory, config_model_key, describe, load_memory
from mvp_tui.providers import registry
from mvp_tui.providers.base import Offer, Provider, ProviderError
from mvp_tui.providers.registry import BOARD
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line

# The providers a board may show, in the order their notes read.
BOARD_PROVIDERS = BOARD  # derived from the kinds (providers/registry.py), read at each use
SEARCH_TIMEOUT_S = 30.0
NOTE_CHARS = 300


@dataclass(slots=True)
class BoardResult:
    """One search of the board: the offers of the providers that answered, and why the
    others have none."""

    offers: list[Offer] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)  # kinds whose offers are fresh
    notes: dict[str, str] = field(default_factory=dict)  # kind -> why it has no offers
    memory: HostMemory = field(default_factory=HostMemory)  # hosts that failed recently
    read_at: float = 0.0
    image: str = ""
    image_gb: float = 0.0
    model: str = ""  # the served model's key in the journal's learned figures
    concurrency: int = 1  # [prompt] concurrency: the streams tok/s and $/Mtok are for

    def outlook(self, need: ModelNeed | None) -> Outlook:
        """Each offer's fit, ~ready and decode speed, from the model's need (None: unknown),
        the image and the host journal (its failures and this user's measured figures)."""
        return outlook_for(need, image=self.image, image_gb=self.image_gb,
                           has_image=self.memory.has_image, learned=self.memory.learned,
                           model=self.model, concurrency=self.concurrency)

    def failure_text(self, offer: Offer) -> str | None:
        """Why `offer`'s host is avoided (`failed 2 h ago at ssh: …`), or None."""
        failure = self.memory.failure(offer)
        return describe(failure, self.read_at) if failure is not None else None


class OfferBoard:
    """Searches every provider on the board at once; `own` is the run's provider, searched
    by `search_own` (the engine's search)."""

    def __init__(
        self,
        config: Config,
        *,
        own: Callable[[], str],
        search_own: Callable[[], Awaitable[list[Offer]]],
        redactor: Redactor,
        build: Callable[[Config], Provider] = build_provider,
        kinds: Sequence[str] = BOARD_PROVIDERS,
        clock: Callable[[], float] = time.time,
        read_need: Callable[[], Awaitable[ModelNeed]] | None = None,
    ) -> None:
        self._config = config
        self._own = own
        self._search_own = search_own
        self._redact = redactor
        self._build = build
        self._kinds = tuple(kinds)
        self._clock = clock
        self._providers: dict[str, Provider] = {}
        self._unconfigured: dict[str, str] = {}
        self._read_need = read_need
        self._need: ModelNeed | None = None  # read once per model (the picker changes it)

    def info_billing(self, kind: str) -> bool:
        """Whether leasing on `kind` bills (asks first); unknown providers are assumed to."""
        provider = self._providers.get(kind)
        if provider is not None:
            return provider.info.billing
        found = registry.find(kind)
        return found is None or found.billing

    def _wanted(self, kind: str) -> bool:
        """Asked besides the run's own: a node that is a child process here (always), and a
        provider that takes an API key (its note says which when it is not set); a container
        engine needs a daemon this app starts, so only when it is the run's provider."""
        found = registry.find(kind)
        if kind == self._own():
            return True
        return found is not None and (found.child_process or bool(found.api_key_env))

    def _provider(self, kind: str) -> Provider | None:
        """The board's client for `kind`, built once; None (and a note) without credentials."""
        if kind in self._providers:
            return self._providers[kind]
        if kind in self._unconfigured:
            return None
        try:
            provider = self._build(self._config.for_provider(kind))
        except ConfigError as exc:
            found = registry.find(kind)
            key = found.api_key_env if found is not None else ""
            text = str(exc)
            why = f"set {key}" if key and "api_key" in text else clean_line(text, NOTE_CHARS)
            self._unconfigured[kind] = f"not configured: {why} (see `mvp-tui config`)"
            return None
        self._providers[kind] = provider
        return provider

    async def search(self) -> BoardResult:
        """Every provider at once; each answers, fails or is not configured on its own.
        The host memory (`[lease] avoid_failed_hosts_days`) is read with them."""
        result = BoardResult(read_at=self._clock())
        own = self._own()
        kinds = [k for k in self._kinds if self._wanted(k)]
        if own not in kinds:
            kinds.insert(0, own)
        searches: dict[str, Awaitable[list[Offer]]] = {}
        for kind in kinds:
            if kind == own:
                searches[kind] = self._search_own()
                continue
            provider = self._provider(kind)
            if provider is None:
                result.notes[kind] = self._unconfigured[kind]
                continue
            policy = selection_policy(self._config.for_provider(kind))
            searches[kind] = provider.search_offers(dataclasses.replace(policy, limit=64))
        answers = await asyncio.gather(
            *(asyncio.wait_for(s, SEARCH_TIMEOUT_S) for s in searches.values()),
            return_exceptions=True,
        )
        for kind, answer in zip(searches, answers, strict=True):
            if isinstance(answer, BaseException):
                result.notes[kind] = self._why(answer)
                continue
            result.answered.append(kind)
            # Rows are keyed by provider: an offer is always its provider's, by kind.
            result.offers += [
                o if o.provider == kind else dataclasses.replace(o, provider=kind) for o in answer
            ]
        # A file read off the loop: a long journal never stalls the screen.
        result.memory = await asyncio.to_thread(load_memory, self._config, result.read_at)
        result.image = self._config.node_image()[0]
        result.image_gb = self._config.settings.image.size_gb
        result.model = config_model_key(self._config)
        result.concurrency = self._config.settings.prompt.concurrency
        return result

    async def model_need(self) -> tuple[ModelNeed | None, str]:
        """The model's VRAM need and "" , or None and why not. Read once it can be (a
        failure is retried on the next call); the board shows its offers before this."""
        if self._need is not None or self._read_need is None:
            return self._need, ""
        try:
            self._need = await asyncio.wait_for(self._read_need(), SEARCH_TIMEOUT_S)
        except Exception as exc:  # the board works without it: fit shows "?"
            why = "no answer" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            return None, clean_line(self._redact(f"model size unknown: {why}"), NOTE_CHARS)
        return self._need, ""

    def forget_need(self) -> None:
        """Another model was chosen: its need is read afresh."""
        self._need = None

    def _why(self, error: BaseException) -> str:
        if isinstance(error, TimeoutError):
            text = f"no answer within {SEARCH_TIMEOUT_S:g} s; r searches again"
        elif isinstance(error, ProviderError | ConfigError | OSError):
            text = str(error)
        else:
            text = f"{type(error).__name__}: {error}"
        return clean_line(self._redact(text), NOTE_CHARS)

    async def aclose(self) -> None:
        for provider in self._providers.values():
            try:
                await provider.aclose()
            except Exception:  # closing a client must never stop the app's exit
                continue



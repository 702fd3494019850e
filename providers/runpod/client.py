"""The RunPod provider on REST v2: catalog offers, create one GPU type per call, poll, list
by name, delete (confirmed by the caller through `get`).

Speaks `https://api.runpod.io/v2` through the shared marketplace client
(providers/marketplace_http.py: `Authorization: Bearer` only, the key never in a URL, every
text redacted, redirects never followed), with our own `User-Agent: mvp-tui/<version>`
(Cloudflare answers a generic or missing one with a plain-text 403 `error code: 1010`).

Facts (reference runpod.md §0, §2 and the createPod description of the OpenAPI document):
- v2 places exactly the GPU type asked for and never falls back: the lease walk walks the
  types (`reorder_offers` re-reads the catalog after a type proves unplaceable).
- Create answers: 201 created; 400 "no longer any instances available" → UNAVAILABLE (next
  type); 403 (problem+json) → FORBIDDEN (pool not accessible: next type); 402 → NO_CREDITS;
  401 → AUTH_FAILED; 422 and any other 400 → REJECTED; 429 → waited out per `Retry-After`
  and sent again (RunPod refuses a 429 before doing anything); 408, 5xx, a timeout or a
  reset after sending → AMBIGUOUS (the pod may exist: the walk reconciles by name, since v2
  has no name filter the whole list is read). A create is never re-sent after anything but
  a 429.
- RUNNING is not readiness: a pod counts as running only once it also has a direct SSH
  endpoint (`ssh.direct`, else the `runtime.ports` entry for 22/tcp with a public IP), and,
  when `probe_ssh_banner`, that endpoint answers with an SSH banner.
- A 404 means gone only in RunPod's own error shape, and only when the pod list no longer
  shows it either; an HTML 404 (a wrong `api_url`) proves nothing. A stopped pod (EXITED)
  still bills its disk: stop is never used as teardown.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from mvp_tui import __version__
from mvp_tui.config import Config, ConfigError
from mvp_tui.node_protocol import api_url_env
from mvp_tui.providers.base import (
    CreateRequest,
    CreateResult,
    DestroyOutcome,
    DestroyResult,
    KeptVolume,
    LeaseState,
    LeaseStatus,
    NetworkVolume,
    Offer,
    Outcome,
    ProviderBase,
    ProviderError,
    ProviderInfo,
    SecretOutcome,
    SelectionPolicy,
    SshEndpoint,
    StartCheck,
    StoredSecret,
)
from mvp_tui.providers.local.node import LineHandler
from mvp_tui.providers.marketplace_http import (
    Marketplace,
    MarketplaceClient,
    NoAnswer,
    Sleep,
    checked_api_url,
    ensure_account_key,
)
from mvp_tui.providers.runpod import logs as runpod_logs
from mvp_tui.providers.runpod import secrets as runpod_secrets
from mvp_tui.providers.runpod import volumes as runpod_volumes
from mvp_tui.providers.runpod.boot import BOOT_MARKER, HOST_KEY_ENV, pod_args
from mvp_tui.providers.runpod.catalog import (
    CLOUDS,
    PROVIDER_NAME,
    MalformedCatalog,
    WalkOrder,
    WalkPolicy,
    read_catalog,
    resort,
    split_offer_id,
    walk_order,
)
from mvp_tui.providers.runpod.section import (
    DEFAULT_MIN_CUDA_VERSION,
    FALLBACK_MIN_VRAM_GB,
    RunpodSection,
)
from mvp_tui.providers.runpod.volumes import (
    VolumeSettings,
    ensure_volume,
    network_mount,
)
from mvp_tui.providers.runpod.walk import auto_data_centers
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import Redact, clean_bytes, clean_line

DEFAULT_API_URL = "https://api.runpod.io/v2"
USER_AGENT = f"mvp-tui/{__version__}"
SSH_PORT = "22/tcp"
_DETAIL_CHARS = 300
_HEAD_BYTES = _DETAIL_CHARS * 4 + 1024
_MAX_LIST_PAGES = 100
_BANNER_TIMEOUT_S = 3.0
GIB = 1024**3
# The start check reads the pod's container log briefly: its backfill is all it needs.
_START_LOG_LINES = 100
_START_LOG_TOTAL_S = 3.0
PRINT_START_COMMAND = "python -m mvp_tui.providers.runpod.boot"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CAPACITY = ("no longer any instances", "no instances", "not enough", "could not be placed")
_PENDING = {"PROVISIONING", "STARTING", "CREATED", "RESTARTING"}
AUTH_FIX = (
    "check [runpod] api_key / RUNPOD_API_KEY (create a key at runpod.io → Settings → API Keys)"
)
RATE_LIMIT_FIX = "wait a minute and retry; another tool using the same key may call too often"
MARKET = Marketplace(
    name="RunPod",
    section="runpod",
    # [runpod] api_url's env name, the one the node reads it by too
    url_env=api_url_env("runpod"),
    url_example=DEFAULT_API_URL,
    auth_fix=AUTH_FIX,
    rate_limit_fix=RATE_LIMIT_FIX,
    user_agent=USER_AGENT,
    url_may_have_path=True,
)
NETWORK_FIX = MARKET.network_fix
KEYS_PAGE = "runpod.io → Settings → SSH Public Keys"
CLOUDFLARE_FIX = (
    "RunPod's Cloudflare front refused the request (error code 1010: a generic or missing "
    "User-Agent); a proxy between here and RunPod may be rewriting it"
)



@dataclass(frozen=True, slots=True)
class RunPodSettings:
    """[runpod] as the provider takes it (`from_section`); a field copied from a key (`KEYS`)
    defaults to the key's declared default, the others are fixed here."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {
        "gpu_types": "runpod.gpu_types",
        "cloud": "runpod.cloud",
        "gpu_count": "runpod.gpu_count",
        "min_vram_gb": "runpod.min_vram_gb",
        "container_disk_gb": "runpod.container_disk_gb",
        "template_id": "runpod.template_id",
    }

    gpu_types: tuple[str, ...] = RunpodSection.gpu_types  # in the user's order; empty = auto
    cloud: str = RunpodSection.cloud  # SECURE | COMMUNITY | ALL
    gpu_count: int = RunpodSection.gpu_count
    # auto's VRAM floor per GPU; None: the run's own need (`use_vram_need`), else
    # FALLBACK_MIN_VRAM_GB
    min_vram_gb: int | None = RunpodSection.min_vram_gb
    container_disk_gb: int = RunpodSection.container_disk_gb
    template_id: str | None = RunpodSection.template_id  # the start command's template
    # [runpod] min_cuda_version (unset: the image's floor, [image] cuda_min); None: any host.
    min_cuda_version: str | None = DEFAULT_MIN_CUDA_VERSION
    max_out_of_stock: int = 3
    probe_ssh_banner: bool = True
    ssh_user: str = "root"
    volume: VolumeSettings | None = None  # [runpod] network_volume: the model cache

    @classmethod
    def from_section(cls, runpod: RunpodSection,
                     cuda_floor: str | None = DEFAULT_MIN_CUDA_VERSION) -> RunPodSettings:
        """[runpod] as loaded (`config.settings.runpod`; min_cuda_version checked there);
        `cuda_floor`: the node image's (`Config.cuda_floor`), which min_cuda_version
        overrides."""
        return cls(
            gpu_types=tuple(t for t in runpod.gpu_types if t.strip()),
            cloud=runpod.cloud,
            gpu_count=runpod.gpu_count,
            min_vram_gb=runpod.min_vram_gb,
            container_disk_gb=runpod.container_disk_gb,
            template_id=(runpod.template_id or "").strip() or None,
            min_cuda_version=runpod.min_cuda_version or cuda_floor,
            volume=VolumeSettings.from_section(runpod),
        )

    @property
    def clouds(self) -> tuple[str, ...]:
        return CLOUDS if self.cloud == "ALL" else (self.cloud,)


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer: status, JSON body (None when not JSON), sanitised and redacted text."""

    status: int
    body: Any
    text: str
    content_type: str
    retry_after: str = ""

    @property
    def problem_shaped(self) -> bool:
        """RunPod's own error shape: v2 problem+json `{title, status, detail}` or the v1
        `{error, status}` (an HTML page from a proxy is neither)."""
        body = self.body
        return (
            isinstance(body, dict)
            and body.get("status") == self.status
            and ("title" in body or "error" in body or "detail" in body)
        )

    @property
    def cloudflare(self) -> bool:
        return self.status == 403 and "error code: 1010" in self.text

    def message(self, redact: Redact) -> str:
        if isinstance(self.body, dict):
            parts = [self.body.get(k) for k in ("detail", "error", "message", "title")]
            text = next((p for p in parts if isinstance(p, str) and p.strip()), "")
            errors = self.body.get("errors")
            if isinstance(errors, list) and errors:
                text += " (" + "; ".join(str(e) for e in errors[:5]) + ")"
            if text:
                return clean_line(text, _DETAIL_CHARS, redact=redact)
        return self.text

    def detail(self, redact: Redact) -> str:
        message = self.message(redact)
        return f"HTTP {self.status}: {message}" if message else f"HTTP {self.status}"


def _checked_api_url(api_url: str) -> str:
    url = checked_api_url(api_url, MARKET)
    if url.endswith("rest.runpod.io/v1"):
        raise ProviderError(
            f"[runpod] api_url {url!r} is RunPod's REST v1, retired on 2026-11-15",
            fix=f'use "{DEFAULT_API_URL}" (or unset [runpod] api_url / MVP_RUNPOD_API_URL)',
        )
    return url


def _parse(response: httpx.Response, redact: Redactor) -> Answer:
    raw = response.content
    content_type = response.headers.get("content-type", "")
    text = clean_bytes(raw, _DETAIL_CHARS, redact=redact, scan_bytes=_HEAD_BYTES)
    body: Any = None
    if raw.strip() and ("json" in content_type or raw.lstrip()[:1] in (b"{", b"[")):
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
    return Answer(
        response.status_code, body, text, content_type, response.headers.get("retry-after", "")
    )


def _pod_path(pod_id: str) -> str:
    text = str(pod_id).strip()
    if not text or len(text) > 128 or not text.isprintable() or "/" in text:
        raise ProviderError(
            f"pod id {clean_line(str(pod_id), 60)!r} is not a RunPod pod id",
            fix="check the run record",
        )
    return f"/pods/{quote(text, safe='')}"


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _port(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536:
        return value
    return None


def _host(value: Any) -> str | None:
    if isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.\-:]*", value.strip()):
        return value.strip()
    return None


def ssh_endpoint(row: Mapping[str, Any], user: str) -> SshEndpoint | None:
    """The direct endpoint: `ssh.direct`, else the runtime's 22/tcp entry with a public IP.
    The proxy (`ssh.runpod.io`) is never used: it has no SFTP and no port forwarding."""
    ssh = row.get("ssh")
    direct = ssh.get("direct") if isinstance(ssh, Mapping) else None
    if isinstance(direct, Mapping):
        host, port = _host(direct.get("host")), _port(direct.get("port"))
        if host and port:
            name = direct.get("username")
            return SshEndpoint(
                host, port, name if isinstance(name, str) and name else user, "direct"
            )
    runtime = row.get("runtime")
    ports = runtime.get("ports") if isinstance(runtime, Mapping) else None
    for entry in ports if isinstance(ports, list) else []:
        if isinstance(entry, Mapping) and entry.get("private") == 22:
            host, port = _host(entry.get("ip")), _port(entry.get("public"))
            if host and port and entry.get("type") in (None, "tcp"):
                return SshEndpoint(host, port, user, "direct")
    return None


def lease_state(status: str) -> LeaseState:
    if status == "RUNNING":
        return LeaseState.RUNNING
    if status == "EXITED":
        return LeaseState.STOPPED  # a stopped pod still bills its disk
    if status in ("ERROR", "DEAD"):
        return LeaseState.DEAD
    if status == "TERMINATED":
        return LeaseState.GONE
    return LeaseState.PENDING


def lease_status(row: Mapping[str, Any], user: str, redact: Redact) -> LeaseStatus:
    raw = row.get("status")
    status = raw if isinstance(raw, str) else ""
    state = lease_state(status)
    endpoint = ssh_endpoint(row, user) if state is LeaseState.RUNNING else None
    detail = ""
    if state is LeaseState.RUNNING and endpoint is None:
        state, detail = LeaseState.PENDING, "running, no SSH endpoint yet"
    name = row.get("name")
    cost = row.get("cost")
    center = row.get("dataCenterId")
    return LeaseStatus(
        provider_id=clean_line(str(row.get("id") or ""), 128, redact=redact),
        label=clean_line(name, 1024, redact=redact) if isinstance(name, str) else None,
        state=state,
        raw_state=clean_line(status or "null", 40, redact=redact)
        + (" (no SSH yet)" if detail else ""),
        ssh=endpoint,
        price_per_hour=float(cost)
        if isinstance(cost, int | float) and not isinstance(cost, bool)
        else None,
        started_at=_timestamp(row.get("startedAt")) or _timestamp(row.get("createdAt")),
        detail=detail,
        data_center=clean_line(center, 64, redact=redact) if isinstance(center, str) else "",
        container_up=status == "RUNNING",
    )


async def ssh_banner(host: str, port: int, within: float = _BANNER_TIMEOUT_S) -> bool:
    """Whether `host:port` answers with an SSH banner (`SSH-…`) within `within` seconds."""
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    return line.startswith(b"SSH-")


class RunPodProvider(ProviderBase):
    """`Provider` for RunPod (REST v2). One instance per run; close it with `aclose()`."""

    info = ProviderInfo(
        name=PROVIDER_NAME,
        billing=True,
        notes=(
            "on-demand pods; price is the catalog's list price × GPU count (USD/h)",
            "one GPU type per create; the walk tries types in order",
            "SSH direct (public IP + mapped 22/tcp); RUNNING alone is not ready",
        ),
    )

    def __init__(
        self,
        *,
        api_key: str,
        api_url: str = DEFAULT_API_URL,
        settings: RunPodSettings | None = None,
        timeout_s: float = 30.0,
        create_timeout_s: float = 60.0,
        rate_limit_retries: int = 5,
        sleep: Sleep = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http: MarketplaceClient[Answer] = MarketplaceClient(
            MARKET,
            api_key=api_key,
            api_url=_checked_api_url(api_url),
            parse=_parse,
            timeout_s=timeout_s,
            rate_limit_retries=rate_limit_retries,
            sleep=sleep,
            transport=transport,
        )
        self._api_url = self._http.api_url
        self._redact = self._http.redact
        self.settings = settings or RunPodSettings()
        self.volume: NetworkVolume | None = None  # the network volume, once found or made
        self._create_timeout_s = create_timeout_s
        self._retries = self._http.retries
        self.rate_limited_waits = self._http.rate_limited_waits  # each Retry-After waited out
        self.last_skipped: list[str] = []
        self._out_of_stock: set[str] = set()  # offer ids the catalog reported out of stock
        self._picked: frozenset[str] = frozenset()  # every offer id the last search gave
        self.last_reorder_error: str | None = None  # why the last catalog re-read failed
        self._policy = WalkPolicy()
        self._host_keys: dict[str, str] = {}  # label → private host key, base64 (secret)
        self._need_gb: int | None = None  # the run's VRAM need per GPU (`use_vram_need`)
        self._secret_names: dict[str, str] = {}  # label → the stored secret holding its key

    def __repr__(self) -> str:
        return f"RunPodProvider(api_url={self._api_url!r}, cloud={self.settings.cloud!r})"

    # -- auto's VRAM floor (seed 003 `vram_floor_gb`) ---------------------------------------

    vram_floor_key = "[runpod] min_vram_gb"

    @property
    def wants_vram_need(self) -> bool:
        """Whether the run's VRAM need sets the floor: `auto` with no min_vram_gb set."""
        return not self.settings.gpu_types and self.settings.min_vram_gb is None

    def use_vram_need(self, per_node_bytes: int | None) -> int:
        """The run's need per pod (the board's fit: weights, cache and margin) as auto's floor
        per GPU, in whole GB as the catalog's `memory`; the next search and every catalog
        re-read of the walk keep it. None (unread, e.g. another model's that the hub did not
        give): FALLBACK_MIN_VRAM_GB again. Returns the floor."""
        count = max(1, self.settings.gpu_count)
        self._need_gb = (
            None if per_node_bytes is None else max(1, math.ceil(per_node_bytes / count / GIB))
        )
        if self._policy.auto:
            self._policy = dataclasses.replace(self._policy, min_vram_gb=self.vram_floor_gb)
        return self.vram_floor_gb

    @property
    def vram_floor_gb(self) -> int:
        """auto's VRAM floor per GPU: min_vram_gb when set, else the run's need, else
        FALLBACK_MIN_VRAM_GB (the need could not be read)."""
        if self.settings.min_vram_gb is not None:
            return self.settings.min_vram_gb
        return self._need_gb if self._need_gb is not None else FALLBACK_MIN_VRAM_GB

    def add_secret(self, secret: str) -> None:
        """Another secret this client must never show (e.g. a host key sent in a pod's env)."""
        self._redact.add(secret)

    async def aclose(self) -> None:
        await self._http.aclose()

    def host_key_for(self, label: str) -> str:
        """The public host key the pod of attempt `label` will present: generated here, its
        private half stored as a RunPod secret (`store_secret`) that the create's env refers
        to (`HOST_KEY_ENV`), and never shown (redacted)."""
        import asyncssh  # the SSH layer's library; loaded only when a pod is about to exist

        key = asyncssh.generate_private_key("ssh-ed25519")
        private = key.export_private_key("openssh")
        encoded = base64.b64encode(private).decode()
        self._redact.add(private.decode())
        self._redact.add(encoded)
        self._host_keys[label] = encoded
        public: str = key.export_public_key("openssh").decode().strip()
        return public

    # -- the host key's secret (providers/runpod/secrets.py) -------------------------------

    def secret_name(self, label: str) -> str | None:
        """The secret attempt `label` needs (its host key's), None when it has no key."""
        if label not in self._host_keys and label not in self._secret_names:
            return None
        return runpod_secrets.secret_name(label)

    async def store_secret(self, label: str) -> StoredSecret:
        """`POST /account/secrets` with the attempt's private host key; only once it is
        STORED does the pod's create refer to it."""
        value = self._host_keys.get(label)
        if value is None:
            return StoredSecret(SecretOutcome.REFUSED, detail=f"no host key made for {label}")
        name = runpod_secrets.secret_name(label)
        body = runpod_secrets.create_body(name, value, label)
        answer = await self._call("POST", runpod_secrets.SECRETS_PATH, body=body)
        if isinstance(answer, NoAnswer):
            outcome = SecretOutcome.UNCLEAR if answer.sent else SecretOutcome.REFUSED
            return StoredSecret(outcome, detail=answer.reason)
        detail = answer.detail(self._redact)
        if answer.cloudflare:
            detail = f"HTTP 403 error code 1010 — {CLOUDFLARE_FIX}"
        result = runpod_secrets.stored(answer.status, answer.body, detail)
        if result.outcome is SecretOutcome.STORED:
            self._secret_names[label] = name
            del self._host_keys[label]  # the secret holds it now; the redactor still knows it
        return result

    async def delete_secret(self, secret_id: str) -> DestroyResult:
        """`DELETE /account/secrets/{id}`: a pod booting later can no longer resolve it."""
        answer = await self._call("DELETE", runpod_secrets.secret_path(secret_id))
        if isinstance(answer, NoAnswer):
            return DestroyResult(DestroyOutcome.FAILED, detail=answer.reason)
        detail = answer.detail(self._redact)
        if answer.cloudflare:
            detail = f"HTTP 403 error code 1010 — {CLOUDFLARE_FIX}"
        return runpod_secrets.deleted(answer.status, answer.problem_shaped, detail)

    def secret_removal(self, name: str, secret_id: str | None) -> str:
        return runpod_secrets.removal(self._api_url, name, secret_id)

    # -- the HTTP exchange ----------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
        timeout_s: float | None = None,
    ) -> Answer | NoAnswer:
        """One API call through the shared client: a 429 is waited out per `Retry-After`
        and sent again (RunPod refuses it before doing anything)."""
        return await self._http.call(method, path, params=params, body=body, timeout_s=timeout_s)

    def _error(self, answer: Answer, action: str) -> ProviderError:
        detail = answer.detail(self._redact)
        if answer.cloudflare:
            return ProviderError(
                f"RunPod refused {action}: HTTP 403 error code 1010",
                fix=CLOUDFLARE_FIX,
                http_status=403,
            )
        return self._http.error(action, answer.status, detail, auth_failed=answer.status == 401)

    def _unreachable(self, no_answer: NoAnswer, action: str) -> ProviderError:
        return self._http.unreachable(no_answer, action)

    # -- offers -----------------------------------------------------------------------------

    async def _catalog(self, cloud: str) -> tuple[list[Any], list[str]]:
        params: dict[str, str | int] = {
            "include": "AVAILABILITY",
            "product": "POD",
            "count": self.settings.gpu_count,
            "cloud": cloud,
        }
        if self.settings.min_cuda_version:
            params["minCudaVersion"] = self.settings.min_cuda_version
        action = "reading the GPU catalog"
        answer = await self._call("GET", "/catalog/gpus", params=params)
        if isinstance(answer, NoAnswer):
            raise self._unreachable(answer, action)
        if answer.status != 200:
            raise self._error(answer, action)
        try:
            page = read_catalog(answer.body, cloud, redact=self._redact)
        except MalformedCatalog as exc:
            raise ProviderError(
                f"RunPod answered the GPU catalog with no GPU list ({exc})",
                fix=f"retry; if it persists, check [runpod] api_url ({self._api_url})",
                http_status=answer.status,
            ) from None
        return list(page.gpus), page.skipped

    async def _order(self, tried: Sequence[str] = (), cap: int | None = None) -> WalkOrder:
        gpus: list[Any] = []
        skipped: list[str] = []
        for cloud in self.settings.clouds:
            found, bad = await self._catalog(cloud)
            gpus += found
            skipped += bad
        order = walk_order(gpus, self._policy, tried=tried, cap=cap)
        self.last_skipped = [self._redact(s) for s in [*skipped, *order.skipped]]
        return order

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]:
        """Offers in the order the walk tries them (see catalog.py); left out in
        `last_skipped`."""
        s = self.settings
        self._policy = WalkPolicy(
            gpu_types=s.gpu_types,
            gpu_count=s.gpu_count,
            min_vram_gb=self.vram_floor_gb,
            max_price_per_hour=policy.max_price_per_hour,
            max_out_of_stock=s.max_out_of_stock,
        )
        order = await self._order()
        self._out_of_stock = set(order.out_of_stock)
        offers = [gpu.offer(s.gpu_count) for gpu in order.gpus]
        self._picked = frozenset(o.offer_id for o in offers)  # before the cut to the limit
        return offers[: policy.limit]

    async def reorder_offers(
        self, remaining: Sequence[Offer], tried: Sequence[Offer]
    ) -> list[Offer]:
        """After a type proved unplaceable: with `auto`, the catalog read again and the types
        left sorted again (an explicit list keeps its order); a type is never offered twice.
        With none left, the types the catalog still gives that were not tried, `auto` or an
        explicit list (seed 003: the walk covers every type, not only the offers first
        handed over). On any failure: `remaining`."""
        tried_ids = [o.offer_id for o in tried]
        if not self._policy.auto and (remaining or self._picked <= set(tried_ids)):
            return list(remaining)  # the user's order: more is queued, or all was tried
        cap = self._policy.max_out_of_stock - sum(1 for i in tried_ids if i in self._out_of_stock)
        self.last_reorder_error = None
        try:
            fresh = await self._order(tried_ids, cap)
        except ProviderError as exc:
            # Said by the walk (seed 003: "the GPU types left keep their order").
            self.last_reorder_error = clean_line(exc.message, 200)
            return list(remaining)
        earlier = frozenset(self._out_of_stock)
        self._out_of_stock |= set(fresh.out_of_stock)
        return resort(remaining, fresh, self.settings.gpu_count, earlier)

    # -- create -----------------------------------------------------------------------------

    def create_body(
        self,
        gpu_id: str,
        cloud: str,
        request: CreateRequest,
        data_centers: Sequence[str] = (),
    ) -> dict[str, Any]:
        """The JSON body of `POST /pods` (CreatePodRequest: unknown fields are a 422);
        `data_centers`: the auto pick (runpod_walk), none for a type out of stock."""
        env: dict[str, str] = {}
        for name, value in request.env.items():
            if not _ENV_NAME.match(name):
                raise ProviderError(
                    f"environment variable name {clean_line(name, 80)!r} is not valid",
                    fix="use letters, digits and _ only, not starting with a digit",
                )
            env[name] = str(value)
        if request.ssh_public_key:
            env["PUBLIC_KEY"] = request.ssh_public_key.strip()
        # Only the reference: the key itself is in the secret, never in the pod's env.
        if request.label in self._secret_names:
            env[HOST_KEY_ENV] = runpod_secrets.secret_reference(self._secret_names[request.label])
        gpu: dict[str, Any] = {"id": gpu_id, "count": self.settings.gpu_count}
        if self.settings.min_cuda_version:
            gpu["minCudaVersion"] = self.settings.min_cuda_version
        body: dict[str, Any] = {
            "name": request.label,
            "image": request.image,
            "gpu": gpu,
            "cloud": cloud,
            "ports": [SSH_PORT],
            "env": env,
            "disk": max(1, self.settings.container_disk_gb),
            # Our own start command runs sshd with the pinned host key (runpod/boot.py);
            # startSsh would only inject the account's keys, which PUBLIC_KEY already carries.
            "startSsh": False,
        }
        template = self.settings.template_id
        if template:
            # The template's start command is ours in the documented JSON form; body fields
            # override the template's (CreatePodRequest.templateId), so no `args` goes with
            # it, while the image stays the configured one (its CUDA floor is sent above).
            body["templateId"] = template
        else:
            # The document's one start field; whether v2 reads the JSON form there is
            # unverified (runpod/boot.py): the walk's start check catches a pod that did not.
            body["args"] = pod_args()
        if data_centers:
            body["dataCenterIds"] = list(data_centers)
        if self.volume is not None:  # the model cache: mounted, so the pod lives beside it
            body["mounts"] = network_mount(self.volume)
            body["dataCenterIds"] = [self.volume.data_center]
        return body

    async def prepare_volume(self) -> NetworkVolume | None:
        """The configured network volume, found or created once per provider (before the
        first create); None when none is configured."""
        if self.settings.volume is not None and self.volume is None:
            self.volume = await ensure_volume(self, self.settings.volume)
        return self.volume

    async def kept_volumes(self, recorded_ids: Collection[str]) -> list[KeptVolume]:
        """The network volumes of ours on the account (kept on purpose), with their cost."""
        return await runpod_volumes.kept_volumes(self, self.settings.volume, recorded_ids)

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult:
        """Create a pod of the offer's GPU type; every answer becomes an `Outcome`."""
        parts = split_offer_id(offer.offer_id) if offer.provider == PROVIDER_NAME else None
        if parts is None:
            return CreateResult(
                Outcome.REJECTED,
                detail=f"offer {clean_line(offer.offer_id, 80)!r} is not a RunPod offer",
            )
        cloud, gpu_id = parts
        await self.prepare_volume()
        centers = auto_data_centers(offer, self._out_of_stock)
        body = self.create_body(gpu_id, cloud, request, centers)
        answer = await self._call("POST", "/pods", body=body, timeout_s=self._create_timeout_s)
        if isinstance(answer, NoAnswer):
            if not answer.sent:
                raise self._unreachable(answer, f"creating a {gpu_id} pod (nothing was created)")
            return CreateResult(Outcome.AMBIGUOUS, detail=answer.reason)
        if answer.status == 429:
            raise self._error(answer, f"creating a {gpu_id} pod (nothing was created)")
        return self.classify_create(answer)

    def classify_create(self, answer: Answer) -> CreateResult:
        detail = answer.detail(self._redact)
        status = answer.status

        def result(
            outcome: Outcome, provider_id: str | None = None, text: str = ""
        ) -> CreateResult:
            return CreateResult(outcome, provider_id, text or detail, status)

        if 200 <= status < 300:
            pod_id = answer.body.get("id") if isinstance(answer.body, dict) else None
            if isinstance(pod_id, str) and pod_id.strip():
                return result(Outcome.CREATED, clean_line(pod_id.strip(), 128))
            return result(Outcome.AMBIGUOUS, text=f"{detail} (no pod id in the answer)")
        if answer.cloudflare:
            return result(Outcome.REJECTED, text=f"HTTP 403 error code 1010 — {CLOUDFLARE_FIX}")
        if status == 401:
            return result(Outcome.AUTH_FAILED)
        if status == 402:
            return result(Outcome.NO_CREDITS)
        if status == 403:
            return result(Outcome.FORBIDDEN)
        if status == 400:
            text = answer.message(self._redact).lower()
            if any(marker in text for marker in _CAPACITY):
                return result(Outcome.UNAVAILABLE)
            return result(Outcome.REJECTED)
        if status == 408 or status >= 500:
            return result(Outcome.AMBIGUOUS)
        if 400 <= status < 500:
            return result(Outcome.REJECTED)
        return result(Outcome.AMBIGUOUS)

    # -- pods -------------------------------------------------------------------------------

    async def _list_rows(self, action: str) -> list[Mapping[str, Any]]:
        """Every pod on the account. The document has no paging, but a live list has been
        recorded answering `pagination {hasNextPage, nextCursor}`: followed when present."""
        found: list[Mapping[str, Any]] = []
        params: dict[str, str | int] = {}
        seen: set[str] = set()
        for _ in range(_MAX_LIST_PAGES):
            answer = await self._call("GET", "/pods", params=params or None)
            if isinstance(answer, NoAnswer):
                raise self._unreachable(answer, action)
            rows = answer.body.get("pods") if isinstance(answer.body, dict) else None
            if answer.status != 200 or not isinstance(rows, list):
                raise self._error(answer, action)
            found += [r for r in rows if isinstance(r, Mapping) and isinstance(r.get("id"), str)]
            paging = answer.body.get("pagination") if isinstance(answer.body, dict) else None
            cursor = paging.get("nextCursor") if isinstance(paging, Mapping) else None
            if not (isinstance(paging, Mapping) and paging.get("hasNextPage") and cursor):
                return found
            if str(cursor) in seen:
                raise ProviderError(
                    f"RunPod's pod list repeated a page cursor while {action}",
                    fix="retry; if it persists, report it to RunPod support",
                )
            seen.add(str(cursor))
            params = {"cursor": str(cursor)}
        raise ProviderError(
            f"RunPod's pod list did not end after {_MAX_LIST_PAGES} pages while {action}",
            fix="retry; if it persists, report it to RunPod support",
        )

    async def _status(self, row: Mapping[str, Any]) -> LeaseStatus:
        status = lease_status(row, self.settings.ssh_user, self._redact)
        probe = status.ssh is not None and self.settings.probe_ssh_banner
        if probe and status.ssh and not await ssh_banner(status.ssh.host, status.ssh.port):
            return dataclasses.replace(
                status,
                state=LeaseState.PENDING,
                ssh=None,
                raw_state=f"{status.raw_state} (sshd not answering)",
                detail="running, the SSH endpoint does not answer with a banner yet",
            )
        return status

    async def get(self, provider_id: str) -> LeaseStatus:
        """The pod as RunPod reports it now; GONE only when a RunPod-shaped 404 *and* the pod
        list agree."""
        path = _pod_path(provider_id)
        action = f"reading pod {clean_line(provider_id, 60)}"
        answer = await self._call("GET", path)
        if isinstance(answer, NoAnswer):
            raise self._unreachable(answer, action)
        if answer.status == 404 and answer.problem_shaped:
            rows = await self._list_rows(action)
            listed = next((r for r in rows if r.get("id") == provider_id), None)
            if listed is not None:
                return await self._status(listed)
            return LeaseStatus(
                provider_id=provider_id, label=None, state=LeaseState.GONE, raw_state="gone",
                detail=answer.detail(self._redact),
            )
        if answer.status != 200 or not isinstance(answer.body, dict):
            raise self._error(answer, action)
        if answer.body.get("id") not in (None, provider_id):
            raise ProviderError(
                f"RunPod answered {action} with another pod", fix="retry; report it if it persists"
            )
        return await self._status({**answer.body, "id": provider_id})

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]:
        """Every pod on the account whose name starts with `prefix` (v2 has no name filter:
        the whole list is read)."""
        rows = await self._list_rows("listing pods")
        found = []
        for row in rows:
            name = row.get("name")
            if isinstance(name, str) and name.startswith(prefix):
                found.append(lease_status(row, self.settings.ssh_user, self._redact))
        return found

    async def last_log_lines(self, provider_id: str, lines: int) -> list[str]:
        """The pod's last log lines (`GET /pods/{id}/logs`, runpod_logs), read before a
        delete; [] when it has none or the API does not answer."""
        try:
            return await runpod_logs.read_tail(
                self._http.stream_client, _pod_path(provider_id), lines, self._redact
            )
        except httpx.HTTPError as exc:
            why = self._http.why(exc, self._http.timeout_s)
            raise ProviderError(
                f"RunPod did not give pod {clean_line(provider_id, 60)}'s logs: {why}",
                fix="none needed: the delete goes on without them",
            ) from None

    async def start_check(self, provider_id: str) -> StartCheck:
        """Whether the pod's start command ran, from its container log (`start_verdict`);
        unknown (`ran=None`) while the log tells neither or cannot be read."""
        try:
            lines = await runpod_logs.read_tail(
                self._http.stream_client, _pod_path(provider_id), _START_LOG_LINES,
                self._redact, total_s=_START_LOG_TOTAL_S, source="container",
            )
        except httpx.HTTPError:
            return StartCheck(None)
        ran, usage = runpod_logs.start_verdict(lines)
        if ran is not False:
            return StartCheck(ran)
        template = self.settings.template_id
        route = (
            f"template {clean_line(template, 60)!r}'s container start command"
            if template
            else "the start command sent in the create's `args`"
        )
        problem = (
            f"RunPod pod {clean_line(provider_id, 60)} ran its image's own entrypoint, not "
            f"{route}: its log has no {BOOT_MARKER} line and shows the "
            f"entrypoint's usage ({clean_line(usage, 80)!r}), so it will never get SSH"
        )
        fix = (
            f"make template {clean_line(template, 60)!r}'s container start command the text "
            f"`{PRINT_START_COMMAND}` prints (this mvp-tui version's)"
            if template
            else "set [runpod] template_id (env MVP_RUNPOD_TEMPLATE_ID) to a RunPod template "
            f"whose container start command is the text `{PRINT_START_COMMAND}` prints "
            "(docs/providers/runpod.md, \"The start command\")"
        )
        return StartCheck(False, problem, fix)

    async def destroy(self, provider_id: str) -> DestroyResult:
        """`DELETE /pods/{id}`: 204 → ACCEPTED (the caller confirms with `get`), a RunPod 404
        → GONE, anything else → FAILED (the walk retries). Never a stop: it still bills."""
        path = _pod_path(provider_id)
        answer = await self._call("DELETE", path)
        if isinstance(answer, NoAnswer):
            return DestroyResult(DestroyOutcome.FAILED, detail=answer.reason)
        detail = answer.detail(self._redact)
        if answer.status in (200, 202, 204):
            return DestroyResult(DestroyOutcome.ACCEPTED, detail, answer.status)
        if answer.status == 404 and answer.problem_shaped:
            return DestroyResult(DestroyOutcome.GONE, detail, answer.status)
        if answer.cloudflare:
            detail = f"HTTP 403 error code 1010 — {CLOUDFLARE_FIX}"
        elif answer.status == 401:
            detail = f"{detail} — {AUTH_FIX}"
        return DestroyResult(DestroyOutcome.FAILED, detail, answer.status)

    # -- account ----------------------------------------------------------------------------

    async def ensure_ssh_key(self, public_key_openssh: str) -> bool:
        """Make sure the account holds this public key (pods created with `startSsh` get the
        account's keys). True when it was registered now (and listed again to check), False
        when already there."""
        return await ensure_account_key(
            MARKET,
            public_key_openssh,
            list_keys=self._account_keys,
            register=self._register_key,
            keys_page=KEYS_PAGE,
        )

    async def _account_keys(self) -> list[str]:
        answer = await self._call("GET", "/account/ssh-keys")
        if isinstance(answer, NoAnswer):
            raise self._unreachable(answer, "listing account SSH keys")
        keys = answer.body.get("keys") if isinstance(answer.body, dict) else None
        if answer.status != 200 or not isinstance(keys, list):
            raise self._error(answer, "listing account SSH keys")
        return [k for k in keys if isinstance(k, str)]

    async def _register_key(self, present: list[str], key_line: str) -> None:
        # The PUT replaces the whole set, so the keys already there are sent back with it.
        answer = await self._call("PUT", "/account/ssh-keys", body={"keys": [*present, key_line]})
        if isinstance(answer, NoAnswer):
            raise self._unreachable(answer, "registering the SSH key")
        if answer.status != 200:
            raise self._error(answer, "registering the SSH key")

    async def account_pods(self) -> int:
        """How many pods the key's account has (`GET /pods`): a read that proves the key
        and spends nothing; raises on a bad key."""
        return len(await self._list_rows("checking the API key"))

    @property
    def server_date(self) -> tuple[str, float] | None:
        """The last answer's Date header and this clock's time when it came."""
        return self._http.last_date

    async def billed_usd(self, provider_id: str) -> float | None:
        """What `/billing/pods` says the pod cost, or None when it has no figure."""
        answer = await self._call("GET", "/billing/pods", params={"podId": provider_id})
        if isinstance(answer, NoAnswer) or answer.status != 200:
            return None
        records = answer.body.get("records") if isinstance(answer.body, dict) else None
        if not isinstance(records, list):
            return None
        amounts = [
            float(r["totalAmount"])
            for r in records
            if isinstance(r, Mapping)
            and r.get("podId") == provider_id
            and isinstance(r.get("totalAmount"), int | float)
        ]
        return round(sum(amounts), 6) if amounts else None


def build(config: Config, on_line: LineHandler | None = None) -> RunPodProvider:
    """The kind's factory (providers/runpod/kind.py); a ConfigError (exit 2) for a missing
    key or a setting RunPod cannot take."""
    runpod = config.settings.of(RunpodSection)
    api_key = runpod.api_key if runpod else None
    if runpod is None or not api_key:  # build_provider names the key and its fix first
        raise ConfigError("[runpod] api_key is required when provider=runpod")
    if runpod.rental == "spot":
        raise ConfigError(
            f"[runpod] rental = \"spot\" (from {config.sources.get('runpod.rental')}): RunPod "
            "no longer offers spot pods (its API answers 500 \"Spot pods are no longer "
            "offered\"); set [runpod] rental = \"on-demand\", or rent interruptible on "
            "Vast.ai ([provider] kind = \"vastai\" with [vastai] rental = \"bid\")"
        )
    cuda = runpod.min_cuda_version
    if cuda is not None and not re.fullmatch(r"\d+\.\d+", cuda):
        raise ConfigError(
            f"[runpod] min_cuda_version = {cuda!r} (from "
            f"{config.sources.get('runpod.min_cuda_version')}) is not valid: expected "
            "major.minor, e.g. 12.4"
        )
    try:
        return RunPodProvider(
            api_key=api_key,
            api_url=runpod.api_url,
            settings=RunPodSettings.from_section(runpod, config.cuda_floor()),
        )
    except ProviderError as exc:
        raise ConfigError(str(exc)) from None

"""RunPod network volumes as the model cache (`[runpod] network_volume`): a second run of the
same model on RunPod downloads nothing.

The volume is found by name (or id) on the account, created when missing (`POST
/network-volumes`, CreateNetworkVolumeRequest), and mounted on every pod of the run at
`VOLUME_MOUNT` (`mounts.network`); the agent's cache (`MVP_MODEL_CACHE_DIR`) is
`VOLUME_CACHE_DIR` on it. A volume lives in one data center, so its pods are created there
(`dataCenterIds`). It bills by the GB and month whether a pod runs or not, so it is never
deleted by `down` or a teardown: only by `mvp-tui volume delete`, which names it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from mvp_tui.providers.base import KeptVolume, NetworkVolume, ProviderError
from mvp_tui.providers.runpod.section import RunpodSection
from mvp_tui.untrusted import clean_line

if TYPE_CHECKING:
    from mvp_tui.providers.runpod.client import Answer, RunPodProvider

VOLUME_MOUNT = "/runpod-volume"  # NetworkMount.path has no default: RunPod's own example
VOLUME_CACHE_DIR = f"{VOLUME_MOUNT}/mvp-models"
# RunPod's published price for network storage under 1 TB (runpod.io/pricing; the API
# answers none): `[runpod] network_volume_usd_per_gb_month`'s declared default.
DEFAULT_USD_PER_GB_MONTH = RunpodSection.network_volume_usd_per_gb_month


@dataclass(frozen=True, slots=True)
class VolumeSettings:
    """[runpod] network_volume*: which volume, and how to make it when it is missing; a
    field's default is its key's declared default."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {
        "name": "runpod.network_volume",
        "size_gb": "runpod.network_volume_gb",
        "data_center": "runpod.network_volume_data_center",
        "usd_per_gb_month": "runpod.network_volume_usd_per_gb_month",
    }

    name: str
    size_gb: int = RunpodSection.network_volume_gb
    data_center: str | None = RunpodSection.network_volume_data_center  # needed to create one
    usd_per_gb_month: float = RunpodSection.network_volume_usd_per_gb_month

    @classmethod
    def from_section(cls, runpod: RunpodSection) -> VolumeSettings | None:
        """[runpod] network_volume and its keys as loaded; None when it names no volume."""
        if not runpod.network_volume:
            return None
        return cls(
            name=runpod.network_volume,
            size_gb=runpod.network_volume_gb,
            data_center=runpod.network_volume_data_center,
            usd_per_gb_month=runpod.network_volume_usd_per_gb_month,
        )


def parse_volume(row: object) -> NetworkVolume | None:
    """A row of the API's answer, or None when it lacks what the document requires."""
    if not isinstance(row, Mapping):
        return None
    vid, name, size, dc = (row.get(k) for k in ("id", "name", "size", "dataCenter"))
    if not (isinstance(vid, str) and isinstance(name, str) and isinstance(dc, str)):
        return None
    if isinstance(size, bool) or not isinstance(size, int):
        return None
    return NetworkVolume(clean_line(vid, 64), clean_line(name, 120), size, clean_line(dc, 40))


def network_mount(volume: NetworkVolume) -> dict[str, Any]:
    """The create's `mounts`: the one network volume, at `VOLUME_MOUNT`."""
    return {"network": [{"volumeId": volume.id, "path": VOLUME_MOUNT}]}


def _volume_path(volume_id: str) -> str:
    return "/network-volumes/" + quote(volume_id, safe="")


async def _ask(
    provider: RunPodProvider, method: str, path: str, action: str, body: Any = None
) -> Answer:
    """One call through the provider's client (its key, retries, redaction); no answer at
    all is an error naming `action`."""
    from mvp_tui.providers.marketplace_http import NoAnswer  # httpx: only when a call is made

    answer = await provider._call(method, path, body=body)
    if isinstance(answer, NoAnswer):
        raise provider._unreachable(answer, action)
    return answer


async def list_volumes(provider: RunPodProvider) -> list[NetworkVolume]:
    answer = await _ask(provider, "GET", "/network-volumes", "listing network volumes")
    rows = answer.body.get("networkVolumes") if isinstance(answer.body, dict) else None
    if answer.status != 200 or not isinstance(rows, list):
        raise provider._error(answer, "listing network volumes")
    return [v for v in (parse_volume(r) for r in rows) if v is not None]


async def kept_volumes(
    provider: RunPodProvider, settings: VolumeSettings | None, recorded_ids: Collection[str]
) -> list[KeptVolume]:
    """The account's volumes mvp-tui uses: the configured one (by id or name) and those a run
    recorded, each priced at `[runpod] network_volume_usd_per_gb_month` (the API answers no
    price)."""
    price = settings.usd_per_gb_month if settings else DEFAULT_USD_PER_GB_MONTH
    wanted = {settings.name} if settings else set()
    if not wanted and not recorded_ids:
        return []  # none configured, none recorded: nothing of ours to look for
    return [
        KeptVolume(v.id, v.name, v.size_gb, round(v.usd_per_month(price), 2))
        for v in await list_volumes(provider)
        if v.id in recorded_ids or v.id in wanted or v.name in wanted
    ]


async def find_volume(provider: RunPodProvider, name_or_id: str) -> NetworkVolume | None:
    """The account's volume with this id, else the one with this name (a name that two
    volumes share is refused: which one to use or delete would be a guess)."""
    volumes = await list_volumes(provider)
    by_id = [v for v in volumes if v.id == name_or_id]
    if by_id:
        return by_id[0]
    named = [v for v in volumes if v.name == name_or_id]
    if len(named) > 1:
        raise ProviderError(
            f"{len(named)} RunPod network volumes are named {clean_line(name_or_id, 80)!r} "
            f"({', '.join(v.id for v in named)})",
            fix="set [runpod] network_volume to one of their ids",
        )
    return named[0] if named else None


async def ensure_volume(provider: RunPodProvider, settings: VolumeSettings) -> NetworkVolume:
    """The configured volume, created when the account has none of that name."""
    found = await find_volume(provider, settings.name)
    if found is not None:
        return found
    if not settings.data_center:
        raise ProviderError(
            f"no RunPod network volume named {clean_line(settings.name, 80)!r}, and no data "
            "center to create it in",
            fix="set [runpod] network_volume_data_center (e.g. EU-RO-1), or name an existing "
            "volume in [runpod] network_volume",
        )
    body = {"name": settings.name, "size": settings.size_gb, "dataCenter": settings.data_center}
    answer = await _ask(provider, "POST", "/network-volumes", "creating the volume", body)
    volume = parse_volume(answer.body)
    if answer.status != 201 or volume is None:
        raise provider._error(answer, "creating the network volume")
    return volume


async def delete_volume(provider: RunPodProvider, volume: NetworkVolume) -> bool:
    """`DELETE /network-volumes/{id}`, confirmed by a read that answers 404; whether the
    volume is gone."""
    action = f"deleting network volume {volume.id}"
    answer = await _ask(provider, "DELETE", _volume_path(volume.id), action)
    if answer.status not in (200, 204, 404):
        raise provider._error(answer, action)
    check = await _ask(provider, "GET", _volume_path(volume.id), f"reading volume {volume.id}")
    return check.status == 404

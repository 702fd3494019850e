"""The network volumes runs have used, recorded under `[state] dir` (`volumes.json`): a volume
bills by the GB and month whether a pod runs or not, so `ls` names it without a provider call,
and nothing but `mvp-tui volume delete` removes it (`down` ends leases, never volumes)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mvp_tui.lease.atomic import write_atomic
from mvp_tui.untrusted import clean_line

FILE_NAME = "volumes.json"


@dataclass(frozen=True, slots=True)
class VolumeRecord:
    provider: str
    volume_id: str
    name: str
    size_gb: int
    data_center: str
    usd_per_gb_month: float
    last_run: str  # the run id that last mounted it

    @property
    def usd_per_month(self) -> float:
        return self.size_gb * self.usd_per_gb_month


def _parse(row: Any) -> VolumeRecord | None:
    if not isinstance(row, dict):
        return None
    try:
        return VolumeRecord(
            provider=clean_line(str(row["provider"]), 16),
            volume_id=clean_line(str(row["volume_id"]), 64),
            name=clean_line(str(row["name"]), 120),
            size_gb=int(row["size_gb"]),
            data_center=clean_line(str(row["data_center"]), 40),
            usd_per_gb_month=float(row["usd_per_gb_month"]),
            last_run=clean_line(str(row.get("last_run", "")), 64),
        )
    except (KeyError, TypeError, ValueError):
        return None


def load_volumes(state_dir: Path) -> list[VolumeRecord]:
    """Every recorded volume; a file that cannot be read counts as none (the provider's own
    list, `mvp-tui volume list`, is the truth)."""
    try:
        rows = json.loads((state_dir / FILE_NAME).read_text())
    except (OSError, ValueError):
        return []
    found = [_parse(r) for r in rows] if isinstance(rows, list) else []
    return [v for v in found if v is not None]


def _save(state_dir: Path, volumes: list[VolumeRecord]) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps([asdict(v) for v in volumes], indent=1) + "\n"
    write_atomic(state_dir / FILE_NAME, text.encode())


def record_volume(state_dir: Path, volume: VolumeRecord) -> None:
    """Add or refresh one volume (by provider and id)."""
    kept = [v for v in load_volumes(state_dir)
            if (v.provider, v.volume_id) != (volume.provider, volume.volume_id)]
    _save(state_dir, [*kept, volume])


def forget_volume(state_dir: Path, provider: str, volume_id: str) -> None:
    key = (provider, volume_id)
    _save(state_dir, [v for v in load_volumes(state_dir) if (v.provider, v.volume_id) != key])

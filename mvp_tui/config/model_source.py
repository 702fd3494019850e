"""Which model the node serves: a local GGUF file or a hub repo's, by the seed's rule.

The orchestrator seed (002, `set_gguf_repo`/`set_gguf_file`/`set_gguf_revision`) applies its
layers in order (defaults, file, env, flags) and, within one layer, `gguf_local_path` before
the hub keys. A local path makes the model local; a hub key set then (in the same layer or a
later one) makes it a hub model again, and the hub keys set before that local path are
forgotten (their built-in defaults come back). So a file's `gguf_local_path` and an env
`MVP_GGUF_REPO` serve the env's repo, and an env path beats a file's repo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.config.values import LAYER_RANK, Source

_LOCAL = "model.gguf_local_path"
_HUB = ("model.gguf_repo", "model.gguf_file", "model.gguf_revision")


@dataclass(frozen=True, slots=True)
class ModelSource:
    """The served model: `local_path`, else the hub's repo/file/revision, and why."""

    local_path: Path | None
    repo: str
    file: str
    revision: str | None
    why: str  # which key and layer decided, for `mvp-tui config`

    def describe(self) -> str:
        if self.local_path is not None:
            return f"local file {str(self.local_path)!r}"
        at = f" at revision {self.revision}" if self.revision else ""
        return f"hub repo {self.repo}, file {self.file}{at}"


def _set(source: Source | None) -> bool:
    return source is not None and source.layer != "default"


def model_source(values: Mapping[str, object], sources: Mapping[str, Source]) -> ModelSource:
    local = values.get(_LOCAL)
    local_source = sources.get(_LOCAL)
    hub = {key: values.get(key) for key in _HUB}
    if not isinstance(local, Path) or local_source is None:
        return ModelSource(
            None,
            str(hub["model.gguf_repo"]),
            str(hub["model.gguf_file"]),
            _text(hub["model.gguf_revision"]),
            "no [model] gguf_local_path is set",
        )
    rank = LAYER_RANK[local_source.layer]
    later = [
        key
        for key in _HUB
        if _set(sources.get(key)) and LAYER_RANK[sources[key].layer] >= rank
    ]
    if not later:
        return ModelSource(
            local,
            str(hub["model.gguf_repo"]),
            str(hub["model.gguf_file"]),
            _text(hub["model.gguf_revision"]),
            f"[model] gguf_local_path from {local_source}; no hub key set in that layer or later",
        )
    # The hub keys set before the local path were undone by it: their defaults come back.
    for key in _HUB:
        if key not in later:
            hub[key] = BY_DOTTED[key].default
    names = ", ".join(
        f"{BY_DOTTED[key].label} from {sources[key]}" for key in later
    )
    why = (
        f"{names} is set in the same or a later layer than [model] gguf_local_path from "
        f"{local_source}, which it overrides (the seed's rule: a hub key after a local path "
        "serves the hub)"
    )
    return ModelSource(
        None,
        str(hub["model.gguf_repo"]),
        str(hub["model.gguf_file"]),
        _text(hub["model.gguf_revision"]),
        why,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

"""`mvp-tui config`: the effective configuration, each value with where it came from."""

from __future__ import annotations

import json
from pathlib import Path

from mvp_tui.config.loader import Config
from mvp_tui.config.schema import KEYS, UI_KEYS_SECTION
from mvp_tui.secrets import REDACTED
from mvp_tui.untrusted import strip_escapes


def _shown(value: object, secret: bool) -> str:
    if value is None:
        return "(unset)"
    if secret:
        return REDACTED
    if isinstance(value, Path):
        return json.dumps(str(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def _install_tag(config: Config) -> str:
    """Which tag this install's labels carry, and where it comes from (made on first use)."""
    from mvp_tui.install_tag import TAG_FILE, install_tag

    configured = config.settings.lease.owner_tag
    if configured:
        return f"# install tag: {configured} (from [lease] owner_tag)"
    path = config.state_dir / TAG_FILE
    try:
        return f"# install tag: {install_tag(config.state_dir)} (kept in {path})"
    except (OSError, ValueError) as exc:
        return f"# install tag: not readable: {exc}"


def render(config: Config) -> str:
    """One line per key: `[section] key = value    # source`, grouped by section."""
    lines = [f"# config file: {config.file or '(none)'}"]
    section = ""
    for spec in KEYS:
        if spec.dotted not in config.values:
            continue
        if spec.section != section:
            section = spec.section
            lines.append(f"\n[{section}]")
        value = _shown(config.values[spec.dotted], spec.secret)
        source = config.sources[spec.dotted]
        note = ""
        if spec.zero_is_unset and value == "(unset)" and source.layer != "default":
            value, note = "0", " (0 = no limit)"  # set to 0, which reads as unset
        lines.append(f"{spec.name} = {value}".ljust(56) + f"  # {source}{note}")
    served = config.model_source
    lines.append(f"\n# model served: {served.describe()}\n#   because {served.why}")
    lines.append(_install_tag(config))
    if config.ui_keys:
        lines.append(f"\n[{UI_KEYS_SECTION}]")
        for binding_id, keys in sorted(config.ui_keys.items()):
            lines.append(f"{binding_id} = {json.dumps(keys)}")
    if config.warnings:
        lines.append("\n# accepted, no effect here:")
        lines.extend(f"#   {warning}" for warning in config.warnings)
    if config.unused:
        lines.append(f"\n# set but not used with provider {config.provider}:")
        for dotted, source in sorted(config.unused.items()):
            lines.append(f"#   {dotted}  ({source})")
    # Values are JSON (escaped), but the comments quote config text as it came (the model's
    # repo, file and revision, the state dir's path): no escape reaches the terminal.
    text = "\n".join(lines)
    return "\n".join(strip_escapes(line) for line in text.split("\n")) + "\n"

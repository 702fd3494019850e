"""Secrets never leave the process in text: every string bound for a log, channel, record,
screen or error passes through a `Redactor` that knows the run's secret values."""

from __future__ import annotations

REDACTED = "<redacted>"


class Redactor:
    """Replaces every known secret value (API keys, tokens) in text with `<redacted>`."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets: set[str] = set()
        for s in secrets or []:
            self.add(s)

    def add(self, secret: str | None) -> None:
        # Very short values would redact ordinary words; real keys are long.
        if secret and len(secret) >= 6:
            self._secrets.add(secret)

    def __call__(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def __bool__(self) -> bool:
        return bool(self._secrets)

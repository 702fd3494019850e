"""Secrets never leave the process in text: every string bound for a log, channel, record,
screen or error passes through a `Redactor` that knows the run's secret values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"
# An environment variable whose name holds one of these carries a secret (HF_TOKEN included).
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
MIN_SECRET_LEN = 6  # very short values would redact ordinary words; real keys are long


class Redactor:
    """Replaces every known secret value (API keys, tokens) in text with `<redacted>`."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets: set[str] = set()
        # Longest first (a secret containing another is replaced whole), sorted once per
        # `add`, not on every call: the datastream redacts every line of a node's output.
        self._ordered: tuple[str, ...] = ()
        # The same secrets as UTF-8 bytes, for `found_in` on raw node lines; None when one
        # has no byte form (then `found_in` always says yes and the text path decides).
        self._needles: tuple[bytes, ...] | None = ()
        for s in secrets or []:
            self.add(s)

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= MIN_SECRET_LEN and secret not in self._secrets:
            self._secrets.add(secret)
            self._ordered = tuple(sorted(self._secrets, key=len, reverse=True))
            try:
                # surrogateescape: how node bytes that are not UTF-8 are decoded for __call__.
                self._needles = tuple(s.encode("utf-8", "surrogateescape") for s in self._ordered)
            except UnicodeEncodeError:
                self._needles = None

    def __call__(self, text: str) -> str:
        for secret in self._ordered:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def found_in(self, raw: bytes) -> bool:
        """Whether `raw` may hold a secret: False means `self(raw.decode(...))` (strict or
        surrogateescape) would change nothing, so a caller can skip decoding for it."""
        needles = self._needles
        if needles is None:
            return True
        # find(), not `in`: bytes.__contains__ first tries the needle as an int and raises
        # and clears a TypeError inside, twice the cost on a short line. A loop, not any():
        # a generator costs more than the search.
        for needle in needles:  # noqa: SIM110
            if raw.find(needle) != -1:
                return True
        return False

    def safe_cut(self, raw: bytes, cut: int) -> int:
        """`cut`, or an earlier index, such that no secret in `raw` spans it: cutting a long
        line there leaves every secret whole in one piece, where it is redacted (a secret
        split in two halves is recognised in neither)."""
        moved = True
        while moved and cut > 0:
            moved = False
            for secret in self._ordered:
                try:
                    needle = secret.encode("utf-8", "surrogateescape")
                except UnicodeEncodeError:  # not a byte string a node could send
                    continue
                # The last occurrence that starts before the cut is the one that may span it.
                start = raw.rfind(needle, max(0, cut - len(needle) + 1), cut + len(needle) - 1)
                if 0 < start < cut < start + len(needle):
                    cut, moved = start, True
        return cut

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def value(self, value: Any) -> Any:
        """A JSON value with every string in it (dict keys too) redacted."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values in `env` that must never be printed (see `is_secret_name`), longest first."""
    found = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(found, key=len, reverse=True)

"""The one shape of an error the user reads: what went wrong, and what to do about it.

`ProviderError`, `SshError`, `RunFailed`, `RecordError` and `ConfigError` are all `UserError`s,
so every surface (the CLI's last line, a toast, a WorkerFatal, a run's reason) shows them the
same way: `message; fix: fix`. The node agent keeps its own copy of the shape (it stands
alone on the node)."""

from __future__ import annotations


class UserError(Exception):
    """An error worded for the user: `message` says what went wrong (naming the key, value,
    file or lease), `fix` what to do; the fix may be empty where the message says it."""

    def __init__(self, message: str, *, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message}; fix: {self.fix}" if self.fix else self.message

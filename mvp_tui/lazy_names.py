"""A package's public names loaded on first use (PEP 562), so importing one light part of the
package does not load its heavy ones (asyncssh, httpx) before they are needed."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The package's module-level `__getattr__`: `homes` maps each name to its module."""
    namespace = importlib.import_module(package).__dict__

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value  # the next lookup is an ordinary attribute
        return value

    return load

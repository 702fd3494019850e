"""The shipped source folders, read once from pyproject.toml's [tool.setuptools.package-dir]
(providers/, widgets/ and themes/ sit at the top of the repo and install under mvp_tui), so a
guard that reads the shipped code follows a folder added there instead of a list typed by hand.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _package_dirs() -> dict[str, str]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        mapping: dict[str, str] = tomllib.load(handle)["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in mapping.items()}


# Source folder (relative to ROOT) → the package it installs as.
PACKAGES: dict[str, str] = _package_dirs()
SHIPPED: tuple[str, ...] = tuple(PACKAGES)


def shipped_files(*, under: Path | None = None) -> Iterator[Path]:
    """Every .py file of the shipped folders (of ROOT, or of a checkout at `under`), sorted
    within each folder."""
    root = ROOT if under is None else under
    for folder in SHIPPED:
        yield from sorted((root / folder).rglob("*.py"))

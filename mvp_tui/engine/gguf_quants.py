"""A hub repo's GGUF files as the models a user picks from: one entry per quant, a split
model (`…-00001-of-00003.gguf`) as one entry with its parts' summed size.

Pure: file names and sizes in, entries out. Names come from the hub, so a path that could
not be served as `[model] gguf_file` (control characters, `..`, not `.gguf`) is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# llama.cpp's quant names as GGUF repos write them (Q4_K_M, Q8_0, IQ4_XS, Q4_0_4_4, BF16,
# UD-Q4_K_XL's Q4_K_XL, …): the last one in the path names the file's quant.
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])(I?Q\d(?:_[0-9A-Z]{1,3})*|TQ\d_\d|BF16|F16|F32|MXFP4(?:_MOE)?)"
    r"(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<parts>\d{5})\.gguf$", re.IGNORECASE)
_SAFE_PATH = re.compile(r"^[A-Za-z0-9._+\-]+(?:/[A-Za-z0-9._+\-]+)*$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,95}/[A-Za-z0-9][A-Za-z0-9._\-]{0,95}$")


def valid_repo(repo: str) -> bool:
    """A hub repo id as `owner/name` (what `[model] gguf_repo` takes)."""
    return bool(_REPO.match(repo)) and ".." not in repo


@dataclass(frozen=True, slots=True)
class RepoHit:
    """A hub search's repo."""

    repo: str
    downloads: int
    likes: int
    gated: bool = False  # its files need an accepted licence (and HF_TOKEN)


@dataclass(frozen=True, slots=True)
class HubFile:
    path: str  # in the repo
    size: int  # bytes


@dataclass(frozen=True, slots=True)
class QuantModel:
    """One model the repo offers: a quant's file, or all the parts of a split one."""

    quant: str  # "Q4_K_M"; "" when the name names none
    files: tuple[str, ...]  # repo paths, in part order (the first is what llama.cpp opens)
    size: int  # bytes, all parts
    parts: int = 1  # how many the split's names say it has (1: one file)

    @property
    def file(self) -> str:
        return self.files[0]

    @property
    def split(self) -> bool:
        return self.parts > 1

    @property
    def complete(self) -> bool:
        return len(self.files) == self.parts

    @property
    def label(self) -> str:
        return self.quant or self.file.rsplit("/", 1)[-1].removesuffix(".gguf")

    def unservable(self) -> str:
        """Why `[model]` cannot serve this one yet, or "" (the node downloads one file)."""
        if not self.complete:
            return (f"{self.label} is split into {self.parts} files and the repo holds "
                    f"{len(self.files)} of them")
        if self.split:
            return (f"{self.label} is split into {self.parts} files, and the node downloads "
                    "one file: choose a single-file quant")
        return ""


def quant_of(path: str) -> str:
    """The quant the path names (its last), upper-cased; "" when it names none."""
    found = _QUANT.findall(path.rsplit("/", 1)[-1]) or _QUANT.findall(path)
    return found[-1].upper() if found else ""


def _servable_name(path: str) -> bool:
    return (
        path.lower().endswith(".gguf")
        and bool(_SAFE_PATH.match(path))
        and ".." not in path.split("/")
        and "mmproj" not in path.rsplit("/", 1)[-1].lower()  # a vision projector, not a model
    )


def group_quants(files: Iterable[HubFile]) -> list[QuantModel]:
    """The repo's models, smallest first: one per file, a split model's parts as one."""
    singles: list[QuantModel] = []
    splits: dict[tuple[str, int], list[tuple[int, HubFile]]] = {}
    for item in files:
        if not _servable_name(item.path) or item.size < 0:
            continue
        match = _SPLIT.match(item.path)
        if match is None:
            singles.append(QuantModel(quant_of(item.path), (item.path,), item.size))
            continue
        parts = int(match["parts"])
        splits.setdefault((match["stem"], parts), []).append((int(match["part"]), item))
    for (stem, parts), found in splits.items():
        found.sort(key=lambda pair: pair[0])
        numbers = [n for n, _ in found]
        if numbers[0] != 1 or numbers != sorted(set(numbers)):
            continue  # no first part, or a part twice: nothing llama.cpp could open
        singles.append(QuantModel(quant_of(stem), tuple(f.path for _, f in found),
                                  sum(f.size for _, f in found), parts))
    return sorted(singles, key=lambda q: (q.size, q.file))

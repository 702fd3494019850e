"""The few GGUF header facts the KV cache's size depends on, read from the file's first bytes.

A GGUF file opens with its metadata: magic, version, tensor and key counts, then typed
key/value pairs (llama.cpp's gguf.h). Only `general.architecture` and that architecture's
layer, head and embedding counts are needed; the parse stops as soon as it has them, so a
hub read fetches a few kilobytes, never the tokenizer's megabytes. Pure: bytes in, numbers out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = b"GGUF"
# Value types (gguf.h `gguf_type`) with a fixed size, by type id.
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}
STRING, ARRAY = 8, 9
MAX_KEYS = 100_000  # a header claiming more is not a GGUF file this reads
MAX_STRING = 1 << 24
MAX_NESTING = 4  # arrays of arrays: real GGUF metadata never nests deeper than 2
MAX_COUNT = 1 << 32  # a layer, head or length count past this is no model's
CANNOT_READ = "cannot read this GGUF"


class ShortRead(Exception):
    """The bytes ended before the facts were found: read more and parse again."""


class NotGguf(ValueError):
    """The bytes are not a GGUF header (or lack the facts): why, in words."""


@dataclass(frozen=True, slots=True)
class GgufShape:
    """What sizes the KV cache: per layer, `kv_heads` × (key + value length) per token."""

    architecture: str
    layers: int
    embedding: int
    heads: int
    kv_heads: int
    key_length: int
    value_length: int
    context_length: int  # the model's trained context; 0 when the header omits it

    def kv_bytes(self, context: int, bytes_per_value: int = 2) -> int:
        """The KV cache at `context` tokens (f16, llama.cpp's default cache type)."""
        per_token = self.layers * self.kv_heads * (self.key_length + self.value_length)
        return per_token * context * bytes_per_value


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int) -> bytes:
        end = self.at + size
        if end > len(self.data):
            raise ShortRead
        chunk = self.data[self.at : end]
        self.at = end
        return chunk

    def unpack(self, fmt: str) -> int:
        value: int = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def string(self) -> str:
        size = self.unpack("<Q")
        if size > MAX_STRING:
            raise NotGguf(f"a header string of {size} bytes")
        return self.take(size).decode("utf-8", errors="replace")

    def value(self, kind: int, depth: int = 0) -> object:
        """One value; arrays of fixed-size items are skipped in one step (None). Nested
        arrays are read to MAX_NESTING levels (a hostile header nests thousands, which would
        exhaust the stack)."""
        if kind in _INTS:
            return self.unpack(_INTS[kind])
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            item, count = self.unpack("<I"), self.unpack("<Q")
            if item in _FIXED:
                values = self.take(_FIXED[item] * count)
                if item in _INTS and count <= 4096:  # per-layer head counts (some models)
                    size = _FIXED[item]
                    return [int.from_bytes(values[i : i + size], "little")
                            for i in range(0, len(values), size)]
                return None
            if item == ARRAY and depth + 1 >= MAX_NESTING:
                raise NotGguf(f"{CANNOT_READ}: its metadata nests arrays more than "
                              f"{MAX_NESTING} deep")
            for _ in range(count):
                self.value(item, depth + 1)
            return None
        if kind in _FIXED:
            self.take(_FIXED[kind])
            return None
        raise NotGguf(f"unknown GGUF value type {kind}")


def parse_shape(data: bytes) -> GgufShape:
    """The shape from a file's first bytes; `ShortRead` when more bytes are needed."""
    cursor = _Cursor(data)
    if cursor.take(4) != MAGIC:
        raise NotGguf("not a GGUF file (no GGUF magic)")
    version = cursor.unpack("<I")
    if version == 1:
        cursor.unpack("<I")
        keys = cursor.unpack("<I")
    else:
        cursor.unpack("<Q")
        keys = cursor.unpack("<Q")
    if keys > MAX_KEYS:
        raise NotGguf(f"a header with {keys} keys")
    found: dict[str, object] = {}
    for _ in range(keys):
        key = cursor.string()
        found[key] = cursor.value(cursor.unpack("<I"))
        if key.startswith("tokenizer.") and _complete(found):
            break  # the tokenizer's arrays follow: nothing more is needed
    return _shape(found)


def _complete(found: dict[str, object]) -> bool:
    arch = found.get("general.architecture")
    return isinstance(arch, str) and all(
        f"{arch}.{k}" in found for k in ("block_count", "embedding_length", "attention.head_count")
    )


def _count(value: object) -> int:
    """A count, or the largest of a per-layer list of them (0 when absent); one past
    MAX_COUNT is no model's (and would overflow the sizes computed from it)."""
    count = 0
    if isinstance(value, int):
        count = value
    elif isinstance(value, list) and value:
        count = max(int(v) for v in value)
    if count > MAX_COUNT:
        raise NotGguf(f"{CANNOT_READ}: its header gives a count of {count}")
    return count


def _shape(found: dict[str, object]) -> GgufShape:
    arch = found.get("general.architecture")
    if not isinstance(arch, str):
        raise NotGguf("the GGUF header names no general.architecture")
    layers = _count(found.get(f"{arch}.block_count"))
    embedding = _count(found.get(f"{arch}.embedding_length"))
    heads = _count(found.get(f"{arch}.attention.head_count"))
    if not (layers and embedding and heads):
        raise NotGguf(f"the GGUF header lacks {arch}'s layer, embedding or head count")
    kv_heads = _count(found.get(f"{arch}.attention.head_count_kv")) or heads
    head_dim = embedding // heads
    return GgufShape(
        architecture=arch,
        layers=layers,
        embedding=embedding,
        heads=heads,
        kv_heads=kv_heads,
        key_length=_count(found.get(f"{arch}.attention.key_length")) or head_dim,
        value_length=_count(found.get(f"{arch}.attention.value_length")) or head_dim,
        context_length=_count(found.get(f"{arch}.context_length")),
    )
